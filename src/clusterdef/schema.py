"""JSON Schema of the definition, for editors and reviewers."""

from __future__ import annotations

from .model import Definition

SCHEMA_ID = "https://clusterdef.dev/schema/clusterdef-v1.json"


def definition_schema() -> dict:
    schema = Definition.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["title"] = "clusterdef cluster definition"
    return schema
