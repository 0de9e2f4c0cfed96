# SpecLab on Hugging Face Spaces (Docker SDK) or any container host: serves the app on port 7860.
#   docker build -t speclab .                              the CPU image: the embedded models on the CPU
#   docker build -t speclab-gpu --build-arg DEVICE=cuda .  a CUDA build of torch; runs `python -m app --device cuda`
# (docs/hosting.md: deploying either, on a GPU Space or any machine with an NVIDIA GPU and its container toolkit)
FROM python:3.11-slim
# cpu or cuda. With cuda the build refuses a torch without CUDA (a mirror that serves CPU wheels): pass
# TORCH_INDEX, a package index that serves CUDA builds of the pinned torch, then.
ARG DEVICE=cpu
ARG TORCH_INDEX=
RUN useradd -m -u 1000 user
WORKDIR /home/user/app
COPY --chown=user requirements.txt .
RUN set -e; \
    case "$DEVICE" in cpu|cuda) ;; *) echo "DEVICE must be cpu or cuda, not '$DEVICE'" >&2; exit 2;; esac; \
    torch="$(grep -E '^torch==' requirements.txt)"; \
    pip install --no-cache-dir "$torch" ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}; \
    grep -vE '^(torch|pytest|pytest-xdist|playwright)==' requirements.txt > /tmp/requirements.txt; \
    pip install --no-cache-dir -r /tmp/requirements.txt; \
    if [ "$DEVICE" = cuda ]; then \
      python -c "import sys, torch; sys.exit(0 if torch.version.cuda else 'this torch has no CUDA: pass --build-arg TORCH_INDEX=<an index with CUDA builds>')"; \
    fi
COPY --chown=user . .
USER user
# The models run in a process of their own (engine/process.py); SPECLAB_ARGS adds options (a preset, say).
ENV GRADIO_SERVER_NAME=0.0.0.0 GRADIO_SERVER_PORT=7860 HF_HUB_OFFLINE=1 SPECLAB_DEVICE=$DEVICE SPECLAB_ARGS=
EXPOSE 7860
CMD ["sh", "-c", "exec python -m app --device \"$SPECLAB_DEVICE\" $SPECLAB_ARGS"]
