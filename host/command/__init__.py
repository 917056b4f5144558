"""Commands and desired state for the fleet: send a command to boards and collect their
answers, set desired state and show drift (fleetwire.host.command.operator; the boards' side
is fleetwire.cmd and fleetwire.desired)."""
