"""Builds /app/delivery.zip: a bundle with a checksum manifest that no longer matches."""
import hashlib
import zipfile

FILES = {
    "bin/tool.py": "#!/usr/bin/env python3\nprint('tool')\n",
    "data/cities.csv": "city,country\nOslo,NO\nLyon,FR\nPorto,PT\n",
    "data/weights.json": '{"alpha": 0.25, "beta": 0.75}\n',
    "docs/user guide.txt": "Start the tool with bin/tool.py.\n",
    "docs/CHANGES.md": "# Changes\n\n- 2.0: new weights\n",
    "lib/core.py": "def core():\n    return 42\n",
    "lib/util.py": "def util():\n    return 'util'\n",
    "lib/legacy.py": "def old():\n    pass\n",
    ".config/settings.ini": "[tool]\nmode = fast\n",
}
manifest = "".join(f"{hashlib.sha256(text.encode()).hexdigest()}  {path}\n"
                   for path, text in sorted(FILES.items()))
shipped = dict(FILES)
shipped["data/weights.json"] = '{"alpha": 0.25, "beta": 0.70}\n'
shipped["docs/user guide.txt"] = "Start the tool with bin/tool.py --fast.\n"
shipped[".config/settings.ini"] = "[tool]\nmode = slow\n"
del shipped["lib/legacy.py"]
shipped["notes/extra.txt"] = "not in the manifest\n"
shipped["MANIFEST.sha256"] = manifest
with zipfile.ZipFile("/app/delivery.zip", "w", zipfile.ZIP_DEFLATED) as archive:
    for path in sorted(shipped):
        info = zipfile.ZipInfo(f"bundle/{path}", date_time=(2024, 6, 1, 9, 30, 0))
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(info, shipped[path])
