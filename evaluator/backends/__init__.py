"""Where whole candidate evaluations run: pools of this machine (local.py) or of a Ray cluster
(ray_cluster.py, imported only for a Ray run)."""

from .base import ClusterError, EvaluationPool, Job, PoolFactory
from .local import LocalPool

__all__ = ["ClusterError", "EvaluationPool", "Job", "LocalPool", "PoolFactory"]
