#!/usr/bin/python3
"""Build strata's training corpus from public-domain texts shipped as Debian packages.

Sources (all public domain texts; see LICENCES below for where each claim is stated):
  web     World English Bible (sword-text-web, SWORD module engWEB2015eb)
  kjv     King James Version (sword-text-kjv, engKJV2006eb)
  tdavid  C. H. Spurgeon, The Treasury of David (sword-comm-tdavid, TDavid)
  austen  Jane Austen's six novels (r-cran-janeaustenr, R lazy-load data parsed by rds.py)
  devil   Ambrose Bierce, The Devil's Dictionary (dict-devil, dictd format)

Output (under --out, default /work/main/build/data/corpus; build/ is git-ignored):
  train/<source>.txt, valid/<source>.txt, train.txt, valid.txt, stats.json
Text format: documents separated by a blank line, paragraphs by a single newline, whitespace inside a
paragraph collapsed to single spaces. A document is a chapter (Bibles, Treasury of David, novels) or
a dictionary entry, cut into pieces of at most --max-doc-chars at paragraph boundaries so no single
huge chapter (Psalm 119's commentary is 1.8 MB) decides the split.

Split: per source, documents are ranked by sha256("<source>/<doc id>") and the first
max(1, round(holdout * n)) go to validation. Deterministic, independent of Python's hash seed.
"""
import argparse
import gzip
import hashlib
import html
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rds  # noqa: E402

SWORD_MODULES = {"web": "engWEB2015eb", "kjv": "engKJV2006eb", "tdavid": "TDavid"}
AUSTEN_RDX = "/usr/lib/R/site-library/janeaustenr/data/Rdata.rdx"
DEVIL_DICT = "/usr/share/dictd/devil.dict.dz"
DEVIL_INDEX = "/usr/share/dictd/devil.index"
LICENCES = {
    "web": "Public Domain (DistributionLicense in /usr/share/sword/mods.d/engWEB2015eb.conf)",
    "kjv": "Public Domain (DistributionLicense in /usr/share/sword/mods.d/engKJV2006eb.conf)",
    "tdavid": "Public Domain (DistributionLicense and About in /usr/share/sword/mods.d/tdavid.conf)",
    "austen": "novels public domain (published 1811-1818); the janeaustenr package code is MIT "
              "(/usr/share/doc/r-cran-janeaustenr/copyright)",
    "devil": "Public Domain, copyright expired (/usr/share/doc/dict-devil/copyright)",
}

_WS = re.compile(r"[ \t\r\f\v\u00a0]+")


def norm_paragraph(s):
    return _WS.sub(" ", s.replace("\n", " ")).strip()


def make_doc(paragraphs):
    return "\n".join(p for p in (norm_paragraph(x) for x in paragraphs) if p)


# ---- SWORD modules (OSIS markup exported by mod2imp) ----------------------------------------------
_NOTE = re.compile(r"<note\b[^>]*>.*?</note>", re.S)
_PARA_BREAK = re.compile(r"<(?:div\b[^>]*\bsID=[^>]*|lb\b[^>]*|lg\b[^>]*|/lg|title\b[^>]*|/title|l\b[^>]*sID[^>]*)/?>")
_TAG = re.compile(r"<[^>]*>")
_KEY = re.compile(r"^\$\$\$(.+?) (\d+):(\d+)$")


def osis_to_paragraphs(markup):
    s = _NOTE.sub("", markup)
    s = _PARA_BREAK.sub("\n", s)
    s = html.unescape(_TAG.sub("", s))
    return s.split("\n")


def sword_docs(module):
    env = dict(os.environ, SWORD_PATH="/usr/share/sword")
    out = subprocess.run(["mod2imp", module], env=env, capture_output=True, check=True).stdout
    docs, order = {}, []
    key = None
    for line in out.decode("utf-8", "replace").split("\n"):
        if line.startswith("$$$"):
            m = _KEY.match(line)
            key = f"{m.group(1)} {m.group(2)}" if m else None  # chapter = book + chapter number
            if key is not None and key not in docs:
                docs[key] = []
                order.append(key)
            continue
        if key is not None:
            # A verse is a running-text fragment: it continues the current paragraph.
            docs[key].append(line)
    for k in order:
        yield k, osis_to_paragraphs(" ".join(docs[k]))


# ---- Jane Austen (R character vectors, one element per printed line) ------------------------------
_CHAPTER = re.compile(r"^(CHAPTER|Chapter)\s+[0-9IVXLC]+\.?\s*$")


def austen_docs():
    db = rds.read_lazyload_db(AUSTEN_RDX)
    for book in sorted(db):
        lines = db[book].value
        chapter, paras, cur = 0, [], []
        for line in lines + [""]:
            line = line or ""
            if _CHAPTER.match(line.strip()):
                if cur:
                    paras.append(" ".join(cur))
                    cur = []
                if any(p.strip() for p in paras):
                    yield f"{book} {chapter}", paras
                chapter, paras = chapter + 1, [line.strip()]
                continue
            if line.strip():
                cur.append(line)
            elif cur:
                paras.append(" ".join(cur))
                cur = []
        if any(p.strip() for p in paras):
            yield f"{book} {chapter}", paras


# ---- Devil's Dictionary (dictd: gzip'd text + index of headword, base64 offset, base64 length) ----
_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def dictd_number(s):
    n = 0
    for c in s:
        n = n * 64 + _B64[c]
    return n


def devil_docs():
    text = gzip.open(DEVIL_DICT, "rb").read()
    for line in open(DEVIL_INDEX, encoding="utf-8"):
        word, off, length = line.rstrip("\n").split("\t")
        if word.startswith("00database"):
            continue
        body = text[dictd_number(off):dictd_number(off) + dictd_number(length)].decode("utf-8", "replace")
        # Entries are paragraphs separated by blank lines; verse lines are kept as running text.
        yield word, re.split(r"\n\s*\n", body)


# ---- split ----------------------------------------------------------------------------------------
def chunk(doc_id, paragraphs, max_chars):
    """Cut one document into pieces of <= max_chars at paragraph boundaries (ids get #k suffixes)."""
    pieces, cur, size = [], [], 0
    for p in (norm_paragraph(x) for x in paragraphs):
        if not p:
            continue
        if cur and size + len(p) > max_chars:
            pieces.append(cur)
            cur, size = [], 0
        cur.append(p)
        size += len(p) + 1
    if cur:
        pieces.append(cur)
    for k, ps in enumerate(pieces):
        yield (f"{doc_id}#{k}" if len(pieces) > 1 else doc_id), "\n".join(ps)


def split_docs(source, docs, holdout):
    ranked = sorted(docs, key=lambda d: hashlib.sha256(f"{source}/{d[0]}".encode()).hexdigest())
    n_valid = max(1, round(holdout * len(docs)))
    valid_ids = {d[0] for d in ranked[:n_valid]}
    train = [t for i, t in docs if i not in valid_ids]
    valid = [t for i, t in docs if i in valid_ids]
    return train, valid


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="/work/main/build/data/corpus")
    ap.add_argument("--holdout", type=float, default=0.02, help="fraction of documents held out per source")
    ap.add_argument("--max-doc-chars", type=int, default=20000)
    ap.add_argument("--sources", default="web,kjv,tdavid,austen,devil")
    args = ap.parse_args()

    readers = {"austen": austen_docs, "devil": devil_docs}
    for name, module in SWORD_MODULES.items():
        readers[name] = (lambda m: lambda: sword_docs(m))(module)
    for split in ("train", "valid"):
        os.makedirs(os.path.join(args.out, split), exist_ok=True)
    stats = {}
    all_text = {"train": [], "valid": []}
    for source in args.sources.split(","):
        if source not in readers:
            sys.exit(f"unknown source '{source}' (known: {', '.join(sorted(readers))})")
        docs = [piece for doc_id, paras in readers[source]() for piece in chunk(doc_id, paras, args.max_doc_chars)]
        docs = [(i, t) for i, t in docs if t]
        if not docs:
            sys.exit(f"source '{source}' produced no text; is its package installed?")
        train, valid = split_docs(source, docs, args.holdout)
        st = {"licence": LICENCES[source]}
        for split, part in (("train", train), ("valid", valid)):
            text = "\n\n".join(part) + "\n"
            with open(os.path.join(args.out, split, f"{source}.txt"), "w", encoding="utf-8") as f:
                f.write(text)
            all_text[split].append(text)
            st[split] = {"docs": len(part), "chars": len(text), "bytes": len(text.encode("utf-8")),
                         "words": len(text.split())}
        stats[source] = st
        print(f"{source:7s} train {st['train']['docs']:5d} docs {st['train']['bytes'] / 1e6:7.2f} MB "
              f"{st['train']['words'] / 1e6:6.2f} M words | valid {st['valid']['docs']:4d} docs "
              f"{st['valid']['bytes'] / 1e6:6.3f} MB", flush=True)
    for split in ("train", "valid"):
        with open(os.path.join(args.out, f"{split}.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(all_text[split]))
    with open(os.path.join(args.out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)
    tot = {s: sum(v[s]["bytes"] for v in stats.values()) for s in ("train", "valid")}
    print(f"total   train {tot['train'] / 1e6:.2f} MB | valid {tot['valid'] / 1e6:.3f} MB -> {args.out}")


if __name__ == "__main__":
    main()
