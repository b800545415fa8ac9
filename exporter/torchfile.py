"""PyTorch files read safely: torch imported on demand, pickles checked before torch.load,
state dicts and HF's pytorch_model.bin."""
import struct

from .common import ExportError, first_line


class TorchStateFile:
    """A torch-saved HF state dict (pytorch_model.bin or one of its shards), with
    SafetensorsFile's interface: .tensors {name: (dtype, shape)}, validate, load. The
    pickle is checked before torch.load runs it (see _check_torch_pickles)."""

    def __init__(self, path):
        torch = _torch()
        self.path = path
        self.sd = _state_dict(_torch_load(path), path)
        self.tensors = {}
        for name, t in self.sd.items():
            if not isinstance(t, torch.Tensor):
                raise ExportError(f"{path}: {name} is not a tensor")
            self.tensors[name] = (str(t.dtype), tuple(t.shape))

    def validate(self, name):
        t = self.sd[name]
        if not t.is_floating_point():
            raise ExportError(f"tensor {name} in {self.path} has dtype {t.dtype}; "
                              f"only floating-point tensors are supported")

    def load(self, name):
        self.validate(name)
        torch = _torch()
        return self.sd[name].detach().to(torch.float32).cpu().numpy()


def _torch():
    try:
        import torch
    except ImportError:
        raise ExportError("torch is required to read .pt/.pth checkpoints (try /usr/bin/python3)")
    return torch


TORCH_PICKLE_GLOBALS = {("collections", "OrderedDict"), ("torch", "Size"),
                        ("torch._utils", "_rebuild_tensor"), ("torch._utils", "_rebuild_tensor_v2"),
                        ("torch._utils", "_rebuild_parameter"),
                        ("torch._utils", "_rebuild_parameter_with_state")}
TORCH_DTYPE_NAMES = {"float32", "float", "float16", "half", "bfloat16", "float64", "double",
                     "int8", "uint8", "int16", "int32", "int64", "bool"}
PICKLE_IMPORTS = ("GLOBAL", "STACK_GLOBAL", "INST", "EXT1", "EXT2", "EXT4")


def _allowed_pickle_global(module, name):
    """Tensors' rebuild functions, storage types, dtypes, OrderedDict: all a
    checkpoint's pickle needs (plain dicts, lists, numbers and strings need none)."""
    return ((module, name) in TORCH_PICKLE_GLOBALS
            or (module == "torch" and (name.endswith("Storage") or name in TORCH_DTYPE_NAMES)))


def _check_torch_pickles(path):
    """Unpickling calls whatever the pickle names, so before torch.load sees the file,
    read (without running) every pickle in the zip and refuse any that imports more
    than _allowed_pickle_global. (torch's weights_only=True cannot be used instead:
    torch 1.13's refuses the floats in every llama2.c model_args.)"""
    import pickletools
    import zipfile
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if not info.filename.endswith(".pkl"):
                    continue
                if info.compress_type != zipfile.ZIP_STORED:
                    raise ExportError(f"{path}: {info.filename} is compressed; torch.save "
                                      f"stores its records uncompressed")
                for op, arg, pos in pickletools.genops(z.read(info)):
                    if op.name not in PICKLE_IMPORTS:
                        continue
                    module, _, name = (arg or "").partition(" ")
                    if op.name != "GLOBAL" or not _allowed_pickle_global(module, name):
                        raise ExportError(f"{path}: {info.filename} would call "
                                          f"{arg or op.name} (byte {pos}); a checkpoint may "
                                          f"hold only tensors and plain data")
    except (zipfile.BadZipFile, ValueError, EOFError, OSError, struct.error) as e:
        raise ExportError(f"{path}: not a torch zip checkpoint ({type(e).__name__}: "
                          f"{first_line(e)})")


def _torch_load(path):
    """torch.load of untrusted data: see _check_torch_pickles."""
    torch = _torch()
    _check_torch_pickles(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # torch raises many kinds for a bad file
        raise ExportError(f"{path}: cannot be read by torch.load ({type(e).__name__}: "
                          f"{first_line(e)})")


def _state_dict(obj, where):
    """obj must be a {str: value} mapping (a torch state dict)."""
    if not isinstance(obj, dict) or not all(isinstance(k, str) for k in obj):
        raise ExportError(f"{where}: expected a state dict (names to tensors), "
                          f"found {type(obj).__name__}")
    return obj
