"""The Alembic migrations, installed as `codemojex.migrations` (setup.py maps this folder
there); `codemojex.db.upgrade` runs them. Nothing imports the revisions: Alembic reads them."""
