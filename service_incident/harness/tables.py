"""Tables the documentation shows, rendered from the definitions themselves (`docs.py` writes them in)."""

from __future__ import annotations

from typing import get_args

from .. import scoring
from ..faults import APP_KINDS, FAULTS, TECHNOLOGIES, Remedy
from ..generator import PRESETS
from ..integrations.tools import ACTION_TOOLS
from ..models import ACTION_TYPES, action_name, describe
from ..tasks import BUDGET_BASE, BUDGET_PER_FAULT, BUDGET_SLACK, GENERATED_BUDGETS
from ..telemetry import ALERT_RULES


def _where(kinds: tuple[str, ...]) -> str:
    found = sorted(set(kinds) - set(APP_KINDS))
    if set(APP_KINDS) <= set(kinds):
        found.insert(0, "app services")
    return ", ".join(found) or ", ".join(sorted(kinds))


def fault_table() -> str:
    rows = [
        "| fault | runs on | fix | also fixes | buys time only | writes of record lost | phrasings | builds up (min) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for fault in FAULTS.values():
        techs = sorted({tech for kind in fault.kinds for tech in TECHNOLOGIES[kind]})
        phrasings = sum(len(fault.phrasings(tech)) for tech in techs)
        lost = ", ".join(kind for kind in fault.kinds if fault.data_at_risk(kind)) or "-"
        rows.append(
            f"| `{fault.name}` | {_where(fault.kinds)} | {fault.fix} | {', '.join(fault.acceptable) or '-'} "
            f"| {', '.join(fault.relief) or '-'} | {lost} | {phrasings} over {len(techs)} technologies "
            f"| {fault.lead[0]}-{fault.lead[1]} |"
        )
    return "\n".join(rows)


def remedy_table() -> str:
    """The faults each remedy fits, from the fault taxonomy: the fix, another fix, or relief only."""
    rows = ["| remedy | the fix for | also fixes | buys time for |", "|---|---|---|---|"]
    for remedy in get_args(Remedy):
        columns = (
            [f"`{f.name}`" for f in FAULTS.values() if f.fix == remedy],
            [f"`{f.name}`" for f in FAULTS.values() if remedy in f.acceptable],
            [f"`{f.name}`" for f in FAULTS.values() if remedy in f.relief],
        )
        rows.append(f"| `{remedy}` | " + " | ".join(", ".join(c) or "-" for c in columns) + " |")
    return "\n".join(rows)


def action_table() -> str:
    rows = ["| action | kind | view | what it does |", "|---|---|---|---|"]
    for action in ACTION_TYPES:
        rows.append(f"| `{action_name(action)}` | {action.kind} | {action.view or '-'} | {describe(action)} |")
    return "\n".join(rows)


def argument_table() -> str:
    """Every argument of the actions, which take it and what it means: the tool schemas' own words."""
    takers: dict[str, list[str]] = {}
    meaning: dict[str, str] = {}
    for spec in ACTION_TOOLS:
        for field, prop in spec.input_schema["properties"].items():
            takers.setdefault(field, []).append(f"`{spec.name}`")
            meaning.setdefault(field, str(prop.get("description", "")).replace("|", "/"))
    everyone = [f"`{spec.name}`" for spec in ACTION_TOOLS]
    rows = ["| argument | of | what it means |", "|---|---|---|"]
    for field, names in takers.items():
        left_out = [name for name in everyone if name not in names]
        if not left_out:
            of = "every action"
        elif len(left_out) < len(names):  # most actions take it: name the few that do not
            of = f"every action but {', '.join(left_out)}"
        else:
            of = ", ".join(names)
        rows.append(f"| `{field}` | {of} | {meaning[field]} |")
    return "\n".join(rows)


def action_list() -> str:
    """Every action's name by kind, for prose that must not fall behind the action types."""
    kinds = {"inspect": "views", "remedy": "remedies", "answer": "answers"}
    groups = {kind: [f"`{action_name(a)}`" for a in ACTION_TYPES if a.kind == kind] for kind in kinds}
    return "; ".join(f"{label} {', '.join(groups[kind])}" for kind, label in kinds.items()) + "."


def alert_table() -> str:
    rows = ["| page | on | fires at |", "|---|---|---|"]
    for rule in ALERT_RULES:
        threshold = f"{rule.threshold:.0%}" if rule.signal.endswith("ratio") else f"{rule.threshold:g}"
        rows.append(f"| `{rule.signal}` | {rule.audience.replace('_', '-')} services | {threshold} |")
    return "\n".join(rows)


def preset_table() -> str:
    rows = [
        "| task | services | entry points | faults | chance a fault is drawn behind the user-facing layer "
        "| strength | red herrings | metrics lag | log gaps | worsens | step budget |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, knobs in PRESETS.items():
        low, high = knobs.faults
        budget = f"{BUDGET_BASE} + {BUDGET_PER_FAULT} x {high} + {BUDGET_SLACK[name]} = {GENERATED_BUDGETS[name]}"
        rows.append(
            f"| `gen_{name}` | {knobs.services[0]}-{knobs.services[1]} | {knobs.entry_points} "
            f"| {low if low == high else f'{low}-{high}'} | {f'{knobs.deep_faults:.0%}' if knobs.deep_faults else '-'} "
            f"| {knobs.intensity[0]}-{knobs.intensity[1]} | {knobs.red_herrings} | {knobs.metrics_lag} "
            f"| {knobs.log_gaps} | {'yes' if knobs.intensify else 'no'} | {budget} |"
        )
    return "\n".join(rows)


def reward_table() -> str:
    rows = ["| step | final | dense |", "|---|---|---|"]
    rows += [f"| {step} | {final} | {dense} |" for step, final, dense in scoring.REWARD_TABLE]
    return "\n".join(rows)


def weight_table() -> str:
    gradings = list(scoring.WEIGHTS)
    parts = list(dict.fromkeys(part for weights in scoring.WEIGHTS.values() for part in weights))
    rows = [f"| part | {' | '.join(gradings)} |", "|---" * (len(gradings) + 1) + "|"]
    for part in parts:
        rows.append(f"| {part} | {' | '.join(str(scoring.WEIGHTS[g].get(part, '-')) for g in gradings)} |")
    rows.append(f"| waste | {' | '.join([f'-{scoring.SCORE_WASTE} each'] * len(gradings))} |")
    return "\n".join(rows)


TABLES = {
    "faults": fault_table,
    "remedies": remedy_table,
    "actions": action_table,
    "action-list": action_list,
    "arguments": argument_table,
    "alerts": alert_table,
    "presets": preset_table,
    "rewards": reward_table,
    "weights": weight_table,
}
