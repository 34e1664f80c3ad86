"""The plugin loader's messages (as OpenMM records them) and an environment, for the doctor's tests (tests/openmm/)."""
from __future__ import annotations

from flashschnet.openmm.doctor_explain import Env

PLUGINS = "/venv/lib/python3.11/site-packages/OpenMM.libs/lib/plugins"
ENV = Env(torch_version="2.11.0+cu130", torch_cuda="13.0", openmm_version="8.6.1",
          openmmtorch=[("acellera-openmmtorch-cpu", "1.10")], platform_packages=[("OpenMM-CUDA-13", "8.6.1")],
          driver=False, requirements={"openmm": "openmm<8.6,>=8.5", "torch": "torch<2.13,>=2.10"})

#: what the dynamic loader says, as OpenMM records it (the first three verbatim from openmm 8.6.1 + openmm-cuda-13
#: on a machine without a GPU driver and without an OpenCL runtime)
DRIVER = (f"Error loading library {PLUGINS}/libOpenMMCUDA.so: libcuda.so.1: cannot open shared object file: "
          "No such file or directory")
OPENCL = (f"Error loading library {PLUGINS}/libOpenMMOpenCL.so: libOpenCL.so.1: cannot open shared object file: "
          "No such file or directory")
DEPENDS = (f"Error loading library {PLUGINS}/libOpenMMAmoebaCUDA.so: libOpenMMCUDA.so: cannot open shared object "
           "file: No such file or directory")
NVRTC = (f"Error loading library {PLUGINS}/libOpenMMCUDA.so: libnvrtc.so.13: cannot open shared object file: "
         "No such file or directory")
CUFFT12 = (f"Error loading library {PLUGINS}/libOpenMMCUDA.so: libcufft.so.11: cannot open shared object file: "
           "No such file or directory")
TORCH_SYMBOL = (f"Error loading library {PLUGINS}/libOpenMMTorchReference.so: {PLUGINS}/libOpenMMTorchReference.so: "
                "undefined symbol: _ZN3c1013MessageLoggerC1EPKciib")
OPENMM_SYMBOL_IN_TORCH = (f"Error loading library {PLUGINS}/libOpenMMTorchCUDA.so: {PLUGINS}/libOpenMMTorchCUDA.so: "
                          "undefined symbol: _ZN6OpenMM11CudaContext12getWorkGroupEv")
OPENMM_SYMBOL = (f"Error loading library {PLUGINS}/libOpenMMCUDA.so: {PLUGINS}/libOpenMMCUDA.so: undefined symbol: "
                 "_ZN6OpenMM14ContextImpl16getPlatformDataEv")
GLIBCXX = (f"Error loading library {PLUGINS}/libOpenMMTorchCUDA.so: /lib/x86_64-linux-gnu/libstdc++.so.6: version "
           f"`GLIBCXX_3.4.32' not found (required by {PLUGINS}/libOpenMMTorchCUDA.so)")
GLIBC = (f"Error loading library {PLUGINS}/libOpenMMCPU.so: /lib64/libc.so.6: version `GLIBC_2.28' not found "
         f"(required by {PLUGINS}/libOpenMMCPU.so)")
TORCH_FIRST = (f"Error loading library {PLUGINS}/libOpenMMTorchReference.so: libtorch_cpu.so: cannot open shared "
               "object file: No such file or directory")
CORE_MOVED = (f"Error loading library {PLUGINS}/libOpenMMTorchReference.so: libOpenMMTorch.so: cannot open shared "
              "object file: No such file or directory")
TORCH_CUDA = (f"Error loading library {PLUGINS}/libOpenMMTorchCUDA.so: libc10_cuda.so: cannot open shared object "
              "file: No such file or directory")
