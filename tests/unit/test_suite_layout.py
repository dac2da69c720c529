"""The test tree has no __init__.py files, so pytest imports each test module by its basename: two test files
with the same name in different directories stop collection of the whole suite ("import file mismatch")."""

from __future__ import annotations

from collections import defaultdict

from rdmaforge.paths import PROJECT_ROOT


def test_test_module_basenames_are_unique() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in (PROJECT_ROOT / "tests").rglob("test_*.py"):
        seen[path.name].append(str(path.relative_to(PROJECT_ROOT)))
    duplicates = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not duplicates, f"rename one of each: {duplicates}"


def test_every_integration_module_is_marked_lab() -> None:
    """tests/conftest.py orders lab modules and starts the lab for tests marked lab: an unmarked lab module would
    run out of order (and `-m "not lab"` would not leave it out)."""
    unmarked = [
        path.name
        for path in sorted((PROJECT_ROOT / "tests" / "integration").glob("test_*.py"))
        if not any(
            line.startswith("pytestmark = ") and "pytest.mark.lab" in line for line in path.read_text().splitlines()
        )
    ]
    assert not unmarked, f"add pytestmark = pytest.mark.lab to {unmarked}"


def test_every_integration_module_has_its_place_in_the_lab_order() -> None:
    """tests/conftest.py runs the lab modules in LAB_ORDER; one missing from it would run last, after the lab is
    removed, and one listed but gone is a stale entry."""
    from conftest import LAB_ORDER

    modules = {path.stem for path in (PROJECT_ROOT / "tests" / "integration").glob("test_*.py")}
    assert set(LAB_ORDER) == modules, {"unlisted": modules - set(LAB_ORDER), "gone": set(LAB_ORDER) - modules}
    assert LAB_ORDER[-1] == "test_zz_lab_down"
