"""Lines of C inside Python string literals (docstrings excluded) in the kernel layer and codegen.

A string literal counts if it looks like C (contains one of ; { } or a C keyword/preprocessor line); its
number of source lines is counted. Usage: python tools/c_in_python.py ROOT"""
import ast
import re
import sys
from pathlib import Path

root = Path(sys.argv[1])
files = sorted((root / "src/utvm/compiler/kernels").glob("*.py")) + [root / "src/utvm/compiler/codegen.py"]
C = re.compile(r"[;{}]|^\s*#(include|if|define|endif|error)|\b(int32_t|int8_t|uint32_t|static|return|for)\b", re.M)
total = 0
per = {}
for f in files:
    tree = ast.parse(f.read_text())
    doc_nodes = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            value = getattr(first, "value", None)
            if isinstance(first, ast.Expr) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                doc_nodes.add(id(first.value))
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            if id(node) in doc_nodes:
                continue
            seg = ast.get_source_segment(f.read_text(), node) or ""
            if C.search(seg):
                lines.update(range(node.lineno, node.end_lineno + 1))
    per[f.name] = len(lines)
    total += len(lines)
for k, v in sorted(per.items(), key=lambda kv: -kv[1]):
    if v:
        print(f"{v:6d} {k}")
print(f"{total:6d} total")
