#!/usr/bin/env python3
"""Checks the book after `mdbook build docs`, where mdBook itself is silent:

* every `{{#include FILE:ANCHOR}}` of docs/src names an anchor that FILE marks with
  `ANCHOR: name` and `ANCHOR_END: name` (mdBook includes nothing, without a word, for an
  anchor that is not there);
* every relative link of the repository's README.md and ARCHITECTURE.md names a file of
  the repository (they link into the book's sources);
* every link of the built HTML: each relative href or src names a file of the book, and
  each #fragment an id (or name) in the page it points to. Links that leave the book
  (http:, https:, mailto:) are not followed: CI has no network.

Exits 1 listing every broken include and link with the page it is on; 2 on bad usage.

    python3 .ci/check_book.py docs
"""
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links = []  # (attribute value, line)
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if a.get(key):
                self.ids.add(a[key])
        for key in ("href", "src"):
            if a.get(key) is not None and tag in ("a", "img", "link", "script", "iframe"):
                self.links.append((a[key], self.getpos()[0]))


def parse(path, cache):
    if path not in cache:
        page = Page()
        page.feed(path.read_text(encoding="utf-8"))
        cache[path] = page
    return cache[path]


INCLUDE = re.compile(r"\{\{#(?:include|rustdoc_include)\s+([^}:\s]+):([A-Za-z_][\w-]*)\s*\}\}")


def check_includes(src):
    """The anchored includes of every chapter under `src` whose anchor is missing."""
    broken, checked = [], 0
    for md in sorted(src.rglob("*.md")):
        for n, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
            for path, anchor in INCLUDE.findall(line):
                checked += 1
                target = (md.parent / path).resolve()
                where = f"{md.relative_to(src)}:{n}: {path}:{anchor}"
                if not target.is_file():
                    broken.append(f"{where} (no such file)")
                    continue
                text = target.read_text(encoding="utf-8")
                for mark in (f"ANCHOR: {anchor}", f"ANCHOR_END: {anchor}"):
                    if not re.search(re.escape(mark) + r"\b", text):
                        broken.append(f"{where} (no `{mark}` in {path})")
    return broken, checked


MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def check_front_pages(repo):
    """The relative links of the repository's front pages that name no file."""
    broken, checked = [], 0
    for name in ("README.md", "ARCHITECTURE.md"):
        page = repo / name
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for link in MD_LINK.findall(line):
                url = urlsplit(link)
                if url.scheme or not url.path:
                    continue
                checked += 1
                if not (repo / unquote(url.path)).exists():
                    broken.append(f"{name}:{n}: {link} (no such file)")
    return broken, checked


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    book = Path(sys.argv[1]).resolve()
    src, root = book / "src", book / "book"
    if not (src / "SUMMARY.md").is_file():
        print(f"{src}: no SUMMARY.md here; give the book's directory (docs)", file=sys.stderr)
        return 2
    if not (root / "index.html").is_file():
        print(f"{root}: no index.html here; build the book first (mdbook build {sys.argv[1]})", file=sys.stderr)
        return 2
    bad_includes, includes = check_includes(src)
    for b in bad_includes:
        print(f"broken include: {b}")
    print(f"includes: {includes} anchored includes, {len(bad_includes)} broken")
    bad_front, front = check_front_pages(book.parent)
    for b in bad_front:
        print(f"broken link: {b}")
    print(f"front pages: {front} links, {len(bad_front)} broken")
    cache, broken, checked = {}, [], 0
    for page_path in sorted(root.rglob("*.html")):
        page = parse(page_path, cache)
        for link, line in page.links:
            url = urlsplit(link)
            if url.scheme or link.startswith("//"):
                continue  # leaves the book
            checked += 1
            where = f"{page_path.relative_to(root)}:{line}: {link}"
            target = page_path if not url.path else (page_path.parent / unquote(url.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if root not in target.parents and target != root:
                broken.append(f"{where} (leaves the book)")
                continue
            if not target.is_file():
                broken.append(f"{where} (no such file)")
                continue
            if url.fragment and target.suffix == ".html":
                if unquote(url.fragment) not in parse(target, cache).ids:
                    broken.append(f"{where} (no #{url.fragment} in {target.relative_to(root)})")
    for b in broken:
        print(f"broken link: {b}")
    print(f"links: {checked} links in {len(cache)} pages, {len(broken)} broken")
    return 1 if broken or bad_includes or bad_front else 0


if __name__ == "__main__":
    sys.exit(main())
