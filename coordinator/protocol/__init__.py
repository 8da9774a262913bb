"""The commit protocol: one instant begun, decided and completed in both tables under the lock, fenced on
storage; the conflict check, heartbeats, markers; and the actions the protocol itself runs (rollback, clean,
archival) with recovery of whatever a crash left."""

from coordinator.protocol.locking import held, table_lock
from coordinator.protocol.recovery import RecoveryReport, recover
from coordinator.protocol.transaction import Transaction

__all__ = ["RecoveryReport", "Transaction", "held", "recover", "table_lock"]
