"""``gramtile profiles``: the cluster profiles ``--cluster`` can name, and the file each comes from."""
from __future__ import annotations

from gramtile.workflows.commands import DeferredRun


def add_parser(sub):
    p = sub.add_parser("profiles", help="list the cluster profiles --cluster accepts, with their source file",
                       description="List every cluster profile `--cluster NAME` accepts: the built-in ones shipped "
                                   "with gramtile (the package's cluster.yaml) and those of the user's file "
                                   "(--cluster-file, $GRAMTILE_CLUSTER_FILE or ./cluster.yaml), which override "
                                   "built-ins of the same name.")
    p.add_argument("--cluster-file", default=None, metavar="FILE", help="cluster profiles file to read too")
    p.add_argument("--json", action="store_true", help="print the profiles as JSON")
    p.add_argument("--job-script", default=None, metavar="NAME",
                   help="print the job script slurm profile NAME submits for each worker job, as "
                        "dask-jobqueue's SLURMCluster writes it (the scheduler address and the worker name "
                        "are those of this look; a run has its own)")
    p.set_defaults(func=DeferredRun("profiles"))
    return p
