# weir's container image: the Cython extensions are built in a first stage, the runtime stage
# gets only wheels (no compiler), runs as a non-root user and checks its own /healthz.
#   docker build -t weir .
#   docker run -e WEIR_UPSTREAM=postgresql://weir@db/app -p 5433:5433 -p 9187:9187 weir
# The bootstrap Job (weir bootstrap, a Spark job) needs an image built with
#   --build-arg WEIR_EXTRAS=spark   (pyspark; a JRE is installed for it)

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG WEIR_EXTRAS=""
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md LICENSE ./
COPY pgwire ./pgwire
COPY proxy ./proxy
COPY engine ./engine
COPY cdc ./cdc
COPY cython_ext ./cython_ext
# every wheel the runtime needs, weir's own with its compiled extensions
RUN pip install --no-cache-dir "Cython==3.0.11" "setuptools==75.8.0" "wheel==0.45.1" \
    && pip wheel --no-cache-dir --wheel-dir /wheels ".${WEIR_EXTRAS:+[$WEIR_EXTRAS]}"

FROM ${PYTHON_IMAGE}
ARG WEIR_EXTRAS=""
LABEL org.opencontainers.image.title="weir" \
      org.opencontainers.image.description="A transparent caching proxy for PostgreSQL" \
      org.opencontainers.image.licenses="GPL-3.0-or-later"
# hadolint ignore=DL3008
RUN if [ "$WEIR_EXTRAS" = "spark" ]; then \
        apt-get update \
        && apt-get install -y --no-install-recommends default-jre-headless libpostgresql-jdbc-java \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && groupadd --system --gid 10001 weir \
    && useradd --system --uid 10001 --gid weir --no-create-home --shell /usr/sbin/nologin weir
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels "weir==0.1.0" \
    && rm -rf /wheels
USER 10001:10001
ENV PYTHONUNBUFFERED=1 \
    WEIR_LISTEN=0.0.0.0:5433 \
    WEIR_METRICS_LISTEN=0.0.0.0:9187
EXPOSE 5433 9187
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9187/healthz', timeout=2)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["weir"]
CMD ["serve"]
