"""The state shared by a run and its child runs: transport, buffer, counters, back-off.

A record is sent at once while MLflow answers, and appended to the buffer otherwise; either way it is
journalled before it is attempted (buffer.py), so a send or a flush can be stopped at any point and
replayed without writing anything twice. Order matters only within a run, so a run whose records cannot go yet (its parent is not
created) waits without holding up other runs; a record MLflow refuses, and every later record of a
run MLflow refused to create, is set aside with the reason instead of blocking the buffer: only a
failure of the network keeps a record waiting (records.py).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from agent_r1.tracking.buffer import RecordBuffer
from agent_r1.tracking.location import quiet_http_defaults, redact_uri
from agent_r1.tracking.records import BadRecord, check_record, is_rejected
from agent_r1.tracking.transport import NotYet, _Transport

# how long `close()` waits for another process's flush of the same buffer before giving up
CLOSE_FLUSH_WAIT_S = 60.0


class _Channel:
    def __init__(self, tracking_uri: str, artifact_root: str | None, buffer_dir: Path, verbose: bool = True):
        quiet_http_defaults()
        self.transport = _Transport(tracking_uri, artifact_root)
        self.buffer = RecordBuffer(buffer_dir)
        self.lock = threading.RLock()
        self.verbose = verbose
        self.offline = False
        self.retry_at = 0.0
        self.backoff = 5.0
        self.last_error = ""
        self.counts = {"sent": 0, "buffered": 0, "flushed": 0, "rejected": 0, "partial_lines": 0}
        self.own_keys: set[str] = set()  # the runs this process created: its report is about their records
        self.run_ids = self.buffer.run_ids()
        self.rejected_runs = self.buffer.rejected_runs()

    @property
    def display_uri(self) -> str:
        return redact_uri(self.transport.tracking_uri)

    def _warn(self, message: str) -> None:
        if self.verbose:
            print(f"[tracking] {redact_uri(message)}", flush=True)

    def _go_offline(self, err: BaseException) -> None:
        self.last_error = redact_uri(f"{type(err).__name__}: {str(err)[:300]}")
        if not self.offline:
            self._warn(f"MLflow at {self.display_uri} is unreachable ({self.last_error}); "
                       f"buffering to {self.buffer.pending_path}")
        self.offline = True
        self.retry_at = time.monotonic() + self.backoff
        self.backoff = min(self.backoff * 2, 120.0)
        self.transport.reset()

    def known_run(self, key: str | None) -> str | None:
        """The MLflow run id of a run key; another process may have created it since we last looked."""
        if key and key not in self.run_ids:
            self.run_ids.update(self.buffer.run_ids())
        return self.run_ids.get(key) if key else None

    def _send(self, record: dict[str, Any], uncertain: bool = False) -> None:
        check_record(record)  # a malformed record says so, whatever else is wrong with its run
        key = record.get("key")
        for k in (key, record.get("parent_key")):
            if k in self.rejected_runs:
                which = "its run" if k == key else "its parent run"
                raise BadRecord(f"{which} {k} was refused by MLflow: {self.rejected_runs[k]}")
            self.known_run(k)
        new_id = self.transport.send(record, self.run_ids, uncertain)
        if new_id:
            self.run_ids[key] = new_id
            self.buffer.remember(key, new_id)

    def submit(self, record: dict[str, Any]) -> None:
        with self.lock:
            try:
                check_record(record)  # before it is buffered: a malformed record never enters the queue
            except BadRecord as err:
                self._reject(record, err)
                return
            if record["op"] == "create_run":
                self.own_keys.add(record["key"])
            if self.offline and time.monotonic() < self.retry_at:
                self._append(record)
                return
            # held while the record is sent, so no other process's flush sends it at the same time
            if not self.buffer.flush_lock.acquire(timeout=0):
                self._append(record)  # another process is flushing: the record queues behind its records
                return
            try:
                if self._flush():
                    self._send_now(record)
                else:
                    self._append(record)
            finally:
                self.buffer.flush_lock.release()

    def _send_now(self, record: dict[str, Any]) -> None:
        """Sends a record at once, journalled before it is attempted: it is appended to the buffer with a
        begin mark, so if MLflow commits it and the reply is lost (or this process dies), the replay knows
        it may have been sent and looks before it writes (transport.py): one run per run key, no doubled
        table. Artifacts are the exception: an upload is idempotent (same paths overwritten) and its
        journal entry would be a copy of the files, so one is copied into the buffer only if it fails."""
        journalled = record.get("op") != "artifacts"
        if journalled:
            record = self.buffer.begin(record)
        try:
            self._send(record)
        except NotYet:
            self._keep(record, journalled)
            return
        except Exception as err:  # noqa: BLE001 - the network's: kept; anything else: set aside
            if is_rejected(err):
                self._reject(record, err)
                if journalled:
                    self.buffer.mark(record["rid"], done=True)
            else:
                self._go_offline(err)
                self._keep(record, journalled)
            return
        if journalled:
            self.buffer.mark(record["rid"], done=True)
        self.counts["sent"] += 1

    def _keep(self, record: dict[str, Any], journalled: bool) -> None:
        """A record that could not go now stays in the buffer (a journalled one is there already)."""
        if journalled:
            self.counts["buffered"] += 1
        else:
            self._append(record)

    def _append(self, record: dict[str, Any]) -> None:
        self.buffer.append(record)
        self.counts["buffered"] += 1

    def _reject(self, record: Any, err: BaseException) -> None:
        if not isinstance(record, dict):  # set aside as what it was, so rejected.jsonl stays one object a line
            record = {"op": None, "record": repr(record)[:1000]}
        reason = redact_uri(f"{type(err).__name__}: {err}")
        self.buffer.reject(record, reason)
        self.counts["rejected"] += 1
        if record.get("op") == "create_run" and isinstance(record.get("key"), str):
            self.rejected_runs[record["key"]] = reason
        self._warn(f"MLflow rejected a {record.get('op')!r} record ({reason}); kept in {self.buffer.rejected_path}")

    def flush(self, wait_s: float | None = 0.0) -> bool:
        """Sends buffered records in order; True when none of them is left behind. `wait_s`: how long to
        wait while another process flushes this buffer (0: do not wait, None: as long as it takes)."""
        with self.lock:
            if not self.buffer.flush_lock.acquire(timeout=wait_s):
                return False
            try:
                return self._flush()
            finally:
                self.buffer.flush_lock.release()

    def _flush(self) -> bool:
        scan = self.buffer.scan()
        if not (scan.records or scan.partial or scan.done_records):
            return True
        created = {r.get("key") for r in scan.records if r.get("op") == "create_run"}
        waiting: set[str] = set()  # runs whose records cannot go yet: later ones wait too (order)
        ok = True
        for record in scan.records:
            key = record.get("key")
            if key in waiting:
                continue
            self.buffer.mark(record["rid"], done=False)
            try:
                # an artifacts record is sent from the buffer's own copy only (buffer.own_blob)
                self._send(self.buffer.sendable(record), uncertain=record["rid"] in scan.in_flight)
                self.counts["flushed"] += 1
            except NotYet as err:
                needed = record.get("parent_key") if record.get("op") == "create_run" else key
                if needed in created:
                    waiting.add(key)
                    ok = False
                    continue
                # nothing pending will ever create that run (its create_run line was lost)
                self._reject(record, BadRecord(f"{err}, and no pending record creates it"))
            except Exception as err:  # noqa: BLE001
                if not is_rejected(err):
                    self._go_offline(err)
                    ok = False
                    break
                self._reject(record, err)
            self.buffer.mark(record["rid"], done=True)
            self.buffer.drop_blob(record)
        partial = self.buffer.compact()
        if partial:
            self.counts["partial_lines"] += len(partial)
            self._warn(f"{len(partial)} unreadable line(s) in {self.buffer.pending_path} "
                       f"(lines {', '.join(str(n) for n, _ in partial)}) set aside in {self.buffer.rejected_path}")
        if ok:
            if self.offline:
                self._warn(f"MLflow is back: flushed {len(scan.records)} buffered record(s)")
            self.offline, self.backoff = False, 5.0
        return ok

    def report(self) -> dict[str, Any]:
        scan = self.buffer.scan()
        # the buffer is shared: another process's records (queued, or journalled while it sends them)
        # are its own to deliver, so a run's report counts its own runs' records; a channel that made
        # no run (the flush command) counts them all
        own = [r for r in scan.records if r.get("key") in self.own_keys] if self.own_keys else scan.records
        return {**self.counts, "pending": len(own), "pending_in_buffer": len(scan.records),
                "partial_lines": self.counts["partial_lines"] + len(scan.partial),
                "offline": self.offline, "buffer": str(self.buffer.pending_path), "last_error": self.last_error,
                "set_aside": self.buffer.rejected_count(), "tracking_uri": self.display_uri}
