# The project image: `sglab sim ...` (the CPU simulator standing in for SGLang), `sglab bench ...` (the in-cluster
# benchmark Job), Locust, and the Job's disruption guard (python -m sglab.deploy.disruption_guard). The checkout
# is installed editable at /app, so stacks/, charts/ and loadtests/ are where sglab looks for them (project_root()).
#   make image                              # sglab:<version> and ghcr.io/sglab-dev/sglab:<version>
#   make image REGISTRY=ghcr.io/<org>       # also <registry>/sglab:<version>, pushed (docs/deploy.md)
#   docker run --rm -p 30000:30000 sglab:0.1.0 sim --model-path /shared/kimi-k2.5-int4 --host 0.0.0.0
FROM python:3.11-slim

ARG SGLAB_VERSION=0.1.0
LABEL org.opencontainers.image.title="sglab" \
      org.opencontainers.image.description="sglab: the benchmark Job, Locust and the SGLang simulator" \
      org.opencontainers.image.version="${SGLAB_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first (cached while only source files change).
COPY pyproject.toml README.md ./
COPY sglab/__init__.py sglab/__init__.py
RUN pip install -e '.[cluster]' && pip uninstall -y sglab  # the Job speaks to the cluster

COPY sglab sglab
COPY stacks stacks
COPY charts charts
COPY loadtests loadtests
COPY Pulumi.yaml __main__.py ./
RUN pip install --no-deps -e . && sglab sim --help > /dev/null

RUN useradd --create-home --uid 10001 sglab && mkdir -p /app/results && chown sglab /app/results
USER 10001

EXPOSE 30000
ENTRYPOINT ["sglab"]
CMD ["--help"]
