"""A migrated MLflow SQLite store in seconds: creating one runs MLflow's migrations (7-11 s on a loaded
2-core machine), so the first is kept as a template beside the temp folder (keyed by the MLflow
version and user) and each module gets a copy of it.

MLflow writes the default experiment's artifact folder into the database as an absolute path, from
the working folder of whoever migrated it; each copy points it at `<folder>/mlruns/0`, beside itself."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from pathlib import Path


def fresh_store(folder: Path) -> str:
    """The URI of a new, migrated SQLite store in `folder` (a copy of the template)."""
    import mlflow
    from mlflow.tracking import MlflowClient

    template = Path(tempfile.gettempdir()) / f"agent-r1-test-mlflow-{mlflow.__version__}-{os.getuid()}.db"
    if not template.exists():
        work = Path(tempfile.mkdtemp(prefix="agent-r1-store-"))
        MlflowClient(tracking_uri=f"sqlite:///{work / 'mlflow.db'}").search_experiments()
        os.replace(work / "mlflow.db", template.with_name(f"{template.name}.{os.getpid()}"))
        os.replace(template.with_name(f"{template.name}.{os.getpid()}"), template)  # whole, for a reader
        shutil.rmtree(work, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(template, folder / "mlflow.db")
    with sqlite3.connect(folder / "mlflow.db") as db:
        db.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
                   (str(folder / "mlruns" / "0"),))
    db.close()
    return f"sqlite:///{folder / 'mlflow.db'}"
