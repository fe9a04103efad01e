"""`clusterdef fabric check`: the as-built InfiniBand (ibnetdiscover) or RoCE (lldpctl) cabling."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

from rich.markup import escape

from .common import EXIT_BAD, EXIT_WARN, add_definition, add_drain_prom, add_format, add_group, add_matrices, \
    add_today, add_verb, bad_path, check_outputs, out, print_findings, today as day, valid, write_file

HELP = "InfiniBand and RoCE fabrics: the as-built cabling against the definition."


def add(verbs: Any) -> None:
    group = add_group(verbs, "fabric", HELP)
    sub = add_verb(group, "check", fabric_check)
    add_definition(sub)
    sub.add_argument("--ibnetdiscover", type=Path, default=None, metavar="IBNETDISCOVER",
                     help="Output of `ibnetdiscover` (default format): an InfiniBand fabric.")
    sub.add_argument("--lldp", type=Path, default=None, metavar="LLDP",
                     help="`lldpctl -f json` of each host (a file named after the host, or a folder of them): "
                          "a RoCE fabric.")
    sub.add_argument("--fabric", default=None, metavar="FABRIC",
                     help="Fabric name (default: the only fabric of the kind).")
    add_format(sub, help="Report format.")
    add_drain_prom(sub)
    add_matrices(sub)
    add_today(sub)


def fabric_check(definition: Path, ibnetdiscover: Optional[Path], lldp: Optional[Path], fabric: Optional[str],
                 fmt: str, drain: Optional[Path], prom: Optional[Path], matrices: Optional[Path],
                 today: Optional[str]) -> None:
    """Hosts cabled to the wrong leaf, missing and degraded links, nodes the definition does not know.
    Exit 0 when the fabric is as declared, 1 when anything is off, 2 on bad input."""
    from ..fabric import check as fc
    from ..fabric import lldp as fl
    from ..fabric.layout import FabricError, layout
    from ..limits import InputError
    from ..validate.pipeline import validate_file

    if (ibnetdiscover is None) == (lldp is None):
        bad_path("give one of --ibnetdiscover FILE (InfiniBand) or --lldp FILE|FOLDER (RoCE)")
    check_outputs(drain, prom)
    d, _ = valid(validate_file(definition, matrices, day(today)))
    try:
        lay = layout(d, fabric, kind="roce" if lldp else "infiniband")
    except FabricError as exc:
        bad_path(str(exc))
    try:
        if lldp is not None:
            report = fl.compare(lay, fl.read(lldp))
        elif ibnetdiscover is not None:
            report = fc.compare(lay, fc.read(ibnetdiscover))
    except InputError as exc:
        print_findings(exc.findings, {})
        raise SystemExit(EXIT_BAD)
    except OSError as exc:  # the folder of lldpctl files cannot be listed
        bad_path(f"{lldp}: {exc.strerror or exc}")
    if drain:
        write_file(drain, "".join(line + "\n" for line in fc.drain_lines(report)))
    if prom:
        write_file(prom, fc.prometheus(report))
    if fmt == "json":
        sys.stdout.write(json.dumps(report.to_json(), indent=2, sort_keys=True) + "\n")
    else:
        for i in report.issues:
            out.print(f"[red]{i.kind}[/] {escape(i.text()[len(i.kind) + 1:])}")
        out.print(f"fabric {escape(report.fabric)}: {report.links_checked} link(s) checked, "
                  f"{len(report.issues)} issue(s)")
    if report.issues:
        raise SystemExit(EXIT_WARN)
