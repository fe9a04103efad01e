"""nccl-tests output and performance baselines: `parse` reads logs into runs, `store`
records and loads baselines, `compare` compares a run with one. The names below are the public API."""

from .parse import (MAX_LINE, BaselineError, Half, Key, Row, Run, choose_run, parse, parse_file, series_name,
                    size_name, size_range)
from .compare import BANDS, DEFAULT_TOLERANCE, Comparison, SizeResult, band, compare, parse_tolerance, pick
from .store import Baseline, baseline_from_run, load_baselines, record, set_baseline_path

__all__ = ["BANDS", "DEFAULT_TOLERANCE", "MAX_LINE", "Baseline", "BaselineError", "Comparison", "Half", "Key", "Row",
           "Run", "SizeResult", "band", "baseline_from_run", "choose_run", "compare", "load_baselines", "parse",
           "parse_file", "parse_tolerance", "pick", "record", "series_name", "set_baseline_path", "size_name",
           "size_range"]
