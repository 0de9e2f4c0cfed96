# SpecLab on Hugging Face Spaces (Docker SDK) or any container host: serves the app on port 7860.
FROM python:3.11-slim
RUN useradd -m -u 1000 user
WORKDIR /home/user/app
COPY --chown=user requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY --chown=user . .
USER user
ENV GRADIO_SERVER_NAME=0.0.0.0 GRADIO_SERVER_PORT=7860 HF_HUB_OFFLINE=1
EXPOSE 7860
CMD ["python", "-m", "app"]
