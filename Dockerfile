# dpsql HTTP service. Build: docker build -t dpsql .
# Run (the policy's [ledger] path must point into the volume, e.g.
# path = "/var/lib/dpsql/ledger.sqlite"; data and policy are mounted read-only):
#   docker run -p 8000:8000 -v "$PWD/data:/data:ro" -v dpsql-state:/var/lib/dpsql dpsql
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 --user-group dpsql \
    && mkdir -p /var/lib/dpsql /data \
    && chown dpsql:dpsql /var/lib/dpsql

WORKDIR /app
COPY pyproject.toml README.md ./
COPY accounting ./accounting
COPY proxy ./proxy
COPY sample_data ./sample_data
# Only what the server needs: a regular (not editable) install of the package, with
# the PostgreSQL client for a shared ledger ([ledger] url), without the dev, BI-client
# or benchmark extras.
RUN python -m pip install --quiet '.[postgres]'

USER dpsql
VOLUME ["/var/lib/dpsql"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"
CMD ["dpsql", "serve", "--host", "0.0.0.0", "--port", "8000", "--policy", "/data/policy.toml"]
