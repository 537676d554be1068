"""Tables the documentation shows, rendered from the definitions themselves (`docs.py` writes them in)."""

from __future__ import annotations

from .. import scoring
from ..faults import APP_KINDS, FAULTS
from ..generator import PRESETS
from ..tasks import GENERATED_BUDGETS


def fault_table() -> str:
    rows = ["| fault | runs on | fix | also fixes | buys time only | data at risk |", "|---|---|---|---|---|---|"]
    for fault in FAULTS.values():
        kinds = set(fault.kinds)
        where = sorted(kinds - set(APP_KINDS))
        if set(APP_KINDS) <= kinds:
            where.insert(0, "app services")
        rows.append(
            f"| `{fault.name}` | {', '.join(where) or ', '.join(sorted(kinds))} | {fault.fix} "
            f"| {', '.join(fault.acceptable) or '-'} | {', '.join(fault.relief) or '-'} "
            f"| {'yes' if fault.data_at_risk else '-'} |"
        )
    return "\n".join(rows)


def preset_table() -> str:
    rows = [
        "| task | services | faults | strength | red herrings | metrics lag | log gaps | worsens | step budget |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, knobs in PRESETS.items():
        rows.append(
            f"| `gen_{name}` | {knobs.services[0]}-{knobs.services[1]} | {knobs.faults} "
            f"| {knobs.intensity[0]}-{knobs.intensity[1]} | {knobs.red_herrings} | {knobs.metrics_lag} "
            f"| {knobs.log_gaps} | {'yes' if knobs.intensify else 'no'} | {GENERATED_BUDGETS[name]} |"
        )
    return "\n".join(rows)


def weight_table() -> str:
    gradings = list(scoring.WEIGHTS)
    parts = list(dict.fromkeys(part for weights in scoring.WEIGHTS.values() for part in weights))
    rows = [f"| part | {' | '.join(gradings)} |", "|---" * (len(gradings) + 1) + "|"]
    for part in parts:
        rows.append(f"| {part} | {' | '.join(str(scoring.WEIGHTS[g].get(part, '-')) for g in gradings)} |")
    rows.append(f"| waste | {' | '.join([f'-{scoring.SCORE_WASTE} each'] * len(gradings))} |")
    return "\n".join(rows)


TABLES = {"faults": fault_table, "presets": preset_table, "weights": weight_table}
