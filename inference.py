"""Baseline run: the expert reference agent plays every triage incident and prints OpenEnv's
[START] / [STEP] / [END] lines on stdout.

    python inference.py
"""

from __future__ import annotations

import sys

from service_incident.agents import ExpertAgent
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import Action
from service_incident.tasks import TASKS

BENCHMARK = "service_incident"
SEED = 42
SUCCESS_SCORE = 0.5


def describe(action: Action) -> str:
    target = getattr(action, "target", "")
    severity = getattr(action, "severity", None)
    return f"{action.__struct_config__.tag}({target}{',' + severity if severity else ''})"


def main() -> int:
    scores: list[float] = []
    for task in TASKS.values():
        for incident_id in task.incidents:
            env, agent = ServiceIncidentEnvironment(), ExpertAgent()
            obs = env.reset(task_id=task.id, seed=SEED, incident_id=incident_id)
            print(f"[START] task={task.id}/{incident_id} env={BENCHMARK} model={agent.name}", flush=True)
            rewards: list[float] = []
            while not obs.done:
                action = agent.act(obs)
                obs = env.step(action)
                rewards.append(obs.reward or 0.0)
                error = obs.last_action_error or "null"
                print(
                    f"[STEP] step={obs.step_count} action={describe(action)} reward={rewards[-1]:.2f} "
                    f"done={str(obs.done).lower()} error={error}",
                    flush=True,
                )
            score = obs.score or 0.0
            scores.append(score)
            print(
                f"[END] success={str(score >= SUCCESS_SCORE).lower()} steps={obs.step_count} score={score:.2f} "
                f"rewards={','.join(f'{r:.2f}' for r in rewards)}",
                flush=True,
            )
    print(f"mean score {sum(scores) / len(scores):.3f} over {len(scores)} episodes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
