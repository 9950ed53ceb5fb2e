"""Write, or check, the golden digests of launchprof's outputs on the bundled traces.

    python scripts/golden_outputs.py            # compare with tests/data/golden_outputs.json
    python scripts/golden_outputs.py --write    # take new digests (at a known-good commit)

Runs the installed ``launchprof`` (the one next to this Python); see tests/golden.py for
what is produced and what is held fixed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import golden  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the digests instead of comparing")
    parser.add_argument("--fast", action="store_true", help="only the quick set (tests/data/traces)")
    args = parser.parse_args()
    selected = [c for c in golden.cases() if c.fast or not args.fast]
    with tempfile.TemporaryDirectory() as work:
        digests = golden.produce(selected, Path(work))
    if args.write:
        golden.write(digests)
        print(f"wrote {len(digests)} cases to {golden.GOLDEN}")
        return 0
    expected = golden.load()
    differ = [name for name, files in digests.items() if expected.get(name) != files]
    for name in differ:
        want = expected.get(name, {})
        changed = sorted(f for f in set(want) | set(digests[name]) if want.get(f) != digests[name].get(f))
        print(f"{name}: {', '.join(changed)} differ")
    print(f"{len(digests) - len(differ)} of {len(digests)} cases identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
