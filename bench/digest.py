"""A SHA-256 over everything the core computes for a fixed set of episodes: a change that only makes
the core faster must leave it unchanged.

Every task, several seeds each (generated tasks also play frozen incidents by id), in both reward
modes, played by each reference agent and by a seeded player of random valid actions (every action
a task allows, remedies included). Hashes the JSON of every observation, its reward and the final
score and breakdown; prints one digest per task and the total.
    python bench/digest.py [--seeds N]
"""

from __future__ import annotations

import argparse
import hashlib

import msgspec

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.returns import players
from service_incident.tasks import TASKS

_encoder = msgspec.json.Encoder(order="deterministic")


def play(env: ServiceIncidentEnvironment, digest: hashlib._Hash, task_id: str, seed: int, incident: str | None) -> None:
    for name, agent in players(seed).items():
        mode = "dense" if (seed + len(name)) % 2 else "final"
        obs = env.reset(task_id=task_id, seed=seed, incident_id=incident, episode_id=f"{name}-{seed}", reward_mode=mode)  # type: ignore[arg-type]
        digest.update(_encoder.encode(obs))
        while not obs.done:
            obs = env.step(agent.act(obs))
            digest.update(_encoder.encode(obs))
            digest.update(repr(obs.reward).encode())
        # A step after the end is answered too.
        digest.update(_encoder.encode(env.step(agent.act(obs))))
        digest.update(_encoder.encode(env.grade()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=4, help="seeds per task")
    args = parser.parse_args()
    total = hashlib.sha256()
    env = ServiceIncidentEnvironment()
    for task_id, task in TASKS.items():
        digest = hashlib.sha256()
        for seed in range(args.seeds):
            play(env, digest, task_id, seed * 7919 + 3, None)
        for incident in task.incidents[: args.seeds] if task.generated else ():
            play(env, digest, task_id, 11, incident)
        print(f"{task_id:<26}{digest.hexdigest()}")
        total.update(digest.digest())
    print(f"{'total':<26}{total.hexdigest()}")


if __name__ == "__main__":
    main()
