"""Where a board's traceback points, in a person's terms: a map written with each build.

A board runs fleetwire as .mpy compiled with -O3, which keeps no line numbers: every frame of
a traceback says `line 1`, with the file's name (as given to mpy-cross with -s: the module's
file name alone) and the function's. The map, symbols.json beside the build, holds for each
such file name the sources that have it (their paths in the repository) and, in each, every
function and method with its qualified name and its lines (def to last line):

    {"format": 1, "release": "1.4.2",
     "files": {"client.py": [{"path": "device/client.py",
                              "functions": [["MQTTClient.publish", "publish", 89, 133], ...]}]}}

symbolicate(traceback, map) rewrites each frame it can resolve:

    File "client.py", line 1, in publish
 -> File "device/client.py", line 89-133 (MQTTClient.publish), in publish

A frame whose function name several functions of the file share lists them all; one the map
does not know (a program's own .py, built with its lines) is left as it was.
"""

import ast
import json
import re

FORMAT = 1
_FRAME = re.compile(r'^(\s*)File "([^"]+)", line (\d+), in (\S+)$')


def functions(source):
    """Every function and method of a module's source -> [[qualname, name, first, last]]."""
    out = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    out.append([q, child.name, child.lineno, child.end_lineno])
                walk(child, q + ".")

    walk(ast.parse(source), "")
    return sorted(out, key=lambda f: f[2])


def make(sources, release=None):
    """sources: [(name in tracebacks, path in the build, source text)] -> the map (a dict)."""
    files = {}
    for name, path, text in sources:
        files.setdefault(name, []).append({"path": path, "functions": functions(text)})
    return {"format": FORMAT, "release": release, "files": files}


def write(path, sources, release=None):
    with open(path, "w") as f:
        json.dump(make(sources, release), f, indent=0, sort_keys=True)


def load(path):
    with open(path) as f:
        m = json.load(f)
    if m.get("format") != FORMAT:
        raise ValueError("%s: a symbol map of format %r, not %d" % (path, m.get("format"), FORMAT))
    return m


def resolve(m, name, func):
    """-> [(path, qualname, first, last)] of the functions a frame (file name, function) can be."""
    hits = []
    for mod in m.get("files", {}).get(name, ()):
        for q, n, first, last in mod["functions"]:
            if n == func:
                hits.append((mod["path"], q, first, last))
    return hits


def symbolicate(text, m):
    """A traceback as a board printed it -> with each frame the map resolves named by its path,
    lines and qualified function; the rest unchanged."""
    out = []
    for line in text.splitlines():
        f = _FRAME.match(line)
        hits = resolve(m, f.group(2), f.group(4)) if f and f.group(3) == "1" else []
        if hits:
            where = " or ".join('"%s", line %d-%d (%s)' % (p, a, b, q) for p, q, a, b in hits)
            line = "%sFile %s, in %s" % (f.group(1), where, f.group(4))
        out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")
