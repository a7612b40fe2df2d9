#!/usr/bin/env python3
"""Reference tokenizer: a plain port of llama2.c run.c `encode` / `decode`.

Independent of the C++ Tokenizer (src/io/tokenizer.cpp), which uses a heap for the merges;
tests/test_tokenizer.cpp hard-codes the ids this script prints.

One rule differs from a literal port, on purpose, in both implementations: the byte-fallback
tokens (ids 3..258) never match text in a lookup and never take part in a merge.
stories15M's tokenizer.bin stores them as the raw byte (or the UTF-8 of U+0080..U+00FF for
bytes >= 0x80) instead of "<0xNN>", so they collide with real pieces (" " is both id 35 and
id 29871; byte 0xE2 reads "\xc3\xa2"). With llama2.c's own tokenizer.bin, whose byte tokens read
"<0xNN>", no lookup or merge can involve them either, so this is what run.c does there.

Usage: python3 tests/golden/llama2c_tokenizer.py TOKENIZER.bin [TEXT ...]
Prints, per text, its repr and the ids of encode(text, bos=True).
"""
import struct
import sys


def load(path):
    data = open(path, "rb").read()
    (max_len,) = struct.unpack_from("<i", data, 0)
    off, pieces, scores = 4, [], []
    while off < len(data):
        score, n = struct.unpack_from("<fi", data, off)
        off += 8
        pieces.append(data[off:off + n])
        scores.append(score)
        off += n
    lookup = {}
    for i, p in enumerate(pieces):
        if is_byte(i):
            continue  # byte-fallback tokens: never looked up (see the module docstring)
        lookup.setdefault(p, i)
    return pieces, scores, lookup


def is_byte(i):
    return 3 <= i < 259


def encode(text, bos, pieces, scores, lookup):
    b = text.encode("utf-8")
    tokens = [1] if bos else []
    if b:
        tokens.append(lookup[b" "])  # dummy prefix
    buf = b""
    for k, c in enumerate(b):
        if (c & 0xC0) != 0x80:
            buf = b""
        buf += bytes([c])
        nxt = b[k + 1] if k + 1 < len(b) else 0
        if (nxt & 0xC0) == 0x80 and len(buf) < 4:
            continue
        if buf in lookup:
            tokens.append(lookup[buf])
        else:
            tokens.extend(x + 3 for x in buf)  # byte fallback
        buf = b""
    while True:  # merge the best-scoring adjacent pair, leftmost on ties
        best_score, best_id, best_idx = -1e10, -1, -1
        for i in range(len(tokens) - 1):
            if is_byte(tokens[i]) or is_byte(tokens[i + 1]):
                continue
            pid = lookup.get(pieces[tokens[i]] + pieces[tokens[i + 1]], -1)
            if pid != -1 and scores[pid] > best_score:
                best_score, best_id, best_idx = scores[pid], pid, i
        if best_idx == -1:
            break
        tokens[best_idx:best_idx + 2] = [best_id]
    return tokens


def main():
    pieces, scores, lookup = load(sys.argv[1])
    for text in sys.argv[2:]:
        print(repr(text), encode(text, True, pieces, scores, lookup))


if __name__ == "__main__":
    main()
