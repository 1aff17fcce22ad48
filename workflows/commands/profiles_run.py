"""The run of ``gramtile profiles`` (its options and help: :mod:`gramtile.workflows.commands.profiles`)."""
from __future__ import annotations

import json

from gramtile.pipeline.compute.cluster import find_cluster_file, load_profiles, packaged_cluster_file, slurm_job_script


def run(args) -> int:
    if args.job_script is not None:
        print(slurm_job_script(args.job_script, args.cluster_file))
        return 0
    profiles = load_profiles(args.cluster_file)
    if args.json:
        print(json.dumps({n: {"type": p.type, "options": p.options, "source": p.source}
                          for n, p in profiles.items()}, indent=2))
        return 0
    user = find_cluster_file(args.cluster_file)
    if user is not None and user.resolve() == packaged_cluster_file().resolve():
        # in a checkout, ./cluster.yaml is the very file the package ships: no user file
        print(f"cluster profiles (user file: none; {user} is the built-in file):")
    else:
        print(f"cluster profiles (user file: {user or 'none'}):")
    width = max(len(n) for n in profiles)
    for name, p in profiles.items():
        opts = ", ".join(f"{k}={v}" for k, v in p.options.items()) or "-"
        print(f"  {name:<{width}}  {p.type:<10}  {opts}")
        print(f"  {'':<{width}}  from {p.source}")
    return 0
