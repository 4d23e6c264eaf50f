"""The docs cannot go stale: the generated reference pages match the code, README stays one screen, links hold."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_generated_reference_pages_match_the_code():
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "docs_reference.py"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_every_sim_fault_is_in_the_fault_table():
    from pytest_sits.platforms.sim.faults import FAULTS

    text = (ROOT / "docs" / "reference" / "sim-faults.md").read_text()
    assert [f for f in FAULTS if f"`{f}`" not in text] == []


def test_every_sits_option_and_subcommand_is_in_the_reference():
    from pytest_sits.cli import build_parser
    from pytest_sits.plugin import hooks

    options = (ROOT / "docs" / "reference" / "options.md").read_text()
    names = re.findall(r'addoption\("(--sits-[a-z-]+)"', Path(hooks.__file__).read_text())
    assert names and [n for n in names if f"`{n}=" not in options] == []
    commands = (ROOT / "docs" / "reference" / "commands.md").read_text()
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    assert [c for c in sub.choices if f"## sits {c}\n" not in commands] == []


def test_readme_fits_on_a_screen_and_starts_with_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150
    block = lines[lines.index("```sh") + 1: lines.index("```sh") + 3]
    assert block[0].startswith("pip install '.[test]' && pytest --sits ")  # not editable; from any folder
    assert block[1].startswith("pip install '.[test]' && pytest -p no:sits -n auto tests ")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "\npip install '.[test]' && pytest -p no:sits -n auto tests\n" in ci  # CI runs README's second command


def test_links_between_pages_lead_somewhere():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_every_docs_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")]
    assert [p for p in pages if p not in nav] == []
