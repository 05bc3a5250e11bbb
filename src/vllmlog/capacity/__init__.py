"""Capacity planning and parameter tuning from the logs (``vllmlog capacity``): what the server has, what the
load needs, which limit binds and when, what-ifs over the engine's flags, replicas for a target rate — every
figure with its basis (logged, derived, estimated, model, default) and its assumptions.

    from vllmlog.run import load
    from vllmlog.capacity import plan
    p = plan(load(["server.log"]), target_rate=20)
    p.servers[0].binding, p.to_dict()
"""

from .figure import BASES, Figure
from .plan import CapacityPlan, Check, ServerCapacity, plan

__all__ = ["BASES", "CapacityPlan", "Check", "Figure", "ServerCapacity", "plan"]
