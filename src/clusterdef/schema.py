"""JSON Schema of the definition, for editors and reviewers."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import GenerateJsonSchema

from .model import Definition

SCHEMA_ID = "https://clusterdef.dev/schema/clusterdef-v1.json"


class _WithFactoryDefaults(GenerateJsonSchema):
    """Show a section's defaults: sections default through `default_factory` (so no model is
    built at import time), which pydantic leaves out of the schema unless asked."""

    def get_default_value(self, schema: Any) -> Any:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            return factory()
        return super().get_default_value(schema)


def definition_schema() -> dict:
    schema = Definition.model_json_schema(mode="validation", schema_generator=_WithFactoryDefaults)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["title"] = "clusterdef cluster definition"
    return schema
