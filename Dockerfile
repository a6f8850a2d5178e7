# The project image: `sglab sim ...` (the CPU simulator standing in for SGLang) and `sglab bench ...`
# (the in-cluster benchmark Job). The checkout is installed editable at /app, so stacks/, charts/ and
# loadtests/ are where sglab looks for them (project_root()).
#   docker build -t sglab:0.1.0 .
#   docker run --rm -p 30000:30000 sglab:0.1.0 sim --model-path /shared/kimi-k2.5-int4 --host 0.0.0.0
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first (cached while only source files change).
COPY pyproject.toml README.md ./
COPY sglab/__init__.py sglab/__init__.py
RUN pip install -e . && pip uninstall -y sglab

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
