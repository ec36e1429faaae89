"""The model registry under crashes, full disks and concurrent writers (issue 30), with real processes.

Writers are killed with SIGKILL at random points, disks fill up (a small tmpfs,
a file-size limit), and two processes change one registry at once. Whatever
happens, what remains is the previous complete state or the new one: the
champion, its history, its lineage and a rollback all work, or say which file
is damaged and where.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from sklearn.dummy import DummyClassifier

from dimbsvm.exceptions import DimbsvmError, StoreError
from dimbsvm.jobs.registry import ModelRegistry
from process_drivers import drive

ROOT = Path(__file__).resolve().parents[1]

#: What every driver process imports once, before it forks the processes it kills.
PRELUDE = """
import json, os, random, resource, shutil, signal, sys, time
from process_drivers import race_two
import numpy as np
from sklearn.dummy import DummyClassifier
from dimbsvm.exceptions import StoreError
from dimbsvm.jobs.registry import ModelRegistry
MODEL = DummyClassifier().fit(np.zeros((4, 1)), [0, 1, 0, 1])
"""


def _model():
    return DummyClassifier().fit(np.zeros((4, 1)), [0, 1, 0, 1])


def _drive(script, *args, timeout=180):
    return drive(PRELUDE, script, *args, timeout=timeout)


def _registry(root, n_versions=3, promoted=1):
    reg = ModelRegistry(root)
    model = _model()
    versions = [reg.add_version(model, job_text="x", info={}, model_meta={}) for _ in range(n_versions)]
    champion = None
    for version in versions[:promoted]:
        assert reg.promote(version, reason="setup", expected_champion=champion)
        champion = version
    return reg, versions


def _lines(path):
    """The complete lines of a history file, each parsed (a glued or torn line fails here), and its tail."""
    raw = Path(path).read_bytes() if Path(path).exists() else b""
    complete = raw[:raw.rfind(b"\n") + 1]
    return [json.loads(line) for line in complete.splitlines()], raw[len(complete):]


def _check_readable(root):
    """Every reader works and agrees: the champion is a complete version and the end of the lineage."""
    reg = ModelRegistry(root)
    champion, history, lineage, versions = reg.champion(), reg.history(), reg.lineage(), reg.versions()
    ids = [v["id"] for v in versions]
    assert champion is None or champion in ids
    assert lineage == [] or lineage[-1] == champion
    assert [v["champion"] for v in versions].count(True) == (champion is not None)
    events, _ = _lines(root / "history.jsonl")
    assert len(events) == len(history)  # every complete line is one event: nothing glued
    return reg, champion, history, lineage


def _check_writable(root):
    """The next writer repairs what a crash left and works: add, promote, roll back."""
    reg, champion, history, lineage = _check_readable(root)
    version = reg.add_version(_model(), job_text="x", info={}, model_meta={})
    assert not list((root / "versions").glob("*.tmp"))  # a killed writer's half version is gone
    assert reg.promote(version, reason="after the kill", expected_champion=champion)
    events, tail = _lines(root / "history.jsonl")
    assert tail == b"" and len(events) == len(history) + 1 and events[-1]["version"] == version
    assert json.loads((root / "champion.json").read_text())["version"] == version == reg.champion()
    if champion is None:
        with pytest.raises(StoreError, match="nothing to roll back to"):
            reg.rollback(reason="after the kill")
    else:
        assert reg.rollback(reason="after the kill") == champion and reg.champion() == champion
    assert not [p.name for p in root.iterdir() if p.name.endswith(".tmp")]


# -- killed at random points --------------------------------------------------

KILL_DRIVER = """
root, snapshots = sys.argv[1], sys.argv[2]
iterations, budget, seed = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
progress = os.path.join(snapshots, "progress.jsonl")
rng = random.Random(seed)


def work(child_seed):
    r = random.Random(child_seed)
    reg = ModelRegistry(root)
    log = open(progress, "a")

    def begin(op, before, after, delta):
        log.write(json.dumps({"op": op, "before": before, "after": after, "events": len(reg.history()),
                              "delta": delta}) + "\\n")
        log.flush()

    while True:
        ids = [v["id"] for v in reg.versions()]
        champion, lineage = reg.champion(), reg.lineage()
        choice = r.random()
        if choice < 0.3 or len(ids) < 2:
            begin("add_version", champion, champion, 0)
            reg.add_version(MODEL, job_text="x", info={}, model_meta={})
        elif choice < 0.6:
            target = r.choice(ids)
            begin("promote", champion, target, 1)
            # events of varied length, so that kills land at every byte offset of a line
            assert reg.promote(target, reason="kill test", expected_champion=champion,
                               event={"pad": "x" * r.randrange(3000)})
        elif choice < 0.75 and len(lineage) >= 2:
            begin("rollback", champion, lineage[-2], 1)
            reg.rollback(reason="kill test")
        elif choice < 0.85:
            target = r.choice(ids)
            begin("set_champion", champion, target, 1)
            reg.set_champion(target, reason="kill test")
        else:
            begin("record", champion, champion, 1)
            reg.record({"action": "keep_champion", "version": champion, "reason": "kill test"})
        log.write(json.dumps({"done": True}) + "\\n")
        log.flush()


deadline = time.monotonic() + budget
done = 0
for i in range(iterations):
    if time.monotonic() > deadline:
        break
    child_seed = rng.randrange(1 << 30)
    pid = os.fork()
    if pid == 0:
        try:
            work(child_seed)
        finally:
            os._exit(0)
    time.sleep(rng.uniform(0.005, 0.4))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    shutil.copytree(root, os.path.join(snapshots, f"{i:03d}"))  # what the killed writer left
    with open(progress, "a") as log:  # after a newline: the killed child's last line may be torn
        log.write("\\n" + json.dumps({"killed": i}) + "\\n")
    done += 1
print(json.dumps({"iterations": done}))
"""


def _progress(path):
    """For each kill: the last operation begun before it, and whether it was done."""
    last, done, out = None, False, {}
    for line in Path(path).read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line the kill tore
        if "op" in record:
            last, done = record, False
        elif "done" in record:
            done = True
        elif "killed" in record:
            out[record["killed"]] = (last, done)
    return out


def test_registry_killed_at_random_points_is_the_old_state_or_the_new(tmp_path):
    root, snapshots = tmp_path / "reg", tmp_path / "snapshots"
    snapshots.mkdir()
    _registry(root)
    result = _drive(KILL_DRIVER, root, snapshots, 25, 15.0, 30)
    assert result["iterations"] >= 20
    kills = _progress(snapshots / "progress.jsonl")
    torn_tails = 0
    for i in range(result["iterations"]):
        snapshot = snapshots / f"{i:03d}"
        reg, champion, history, lineage = _check_readable(snapshot)
        last, done = kills[i]
        if last is not None:
            if done:  # the operation returned: its result is there
                assert champion == last["after"] and len(history) == last["events"] + last["delta"]
            else:  # killed inside it: the state before or after, the event exactly when the change
                assert champion in (last["before"], last["after"])
                assert len(history) in (last["events"], last["events"] + last["delta"])
                if last["before"] != last["after"]:
                    assert (champion == last["after"]) == (len(history) == last["events"] + 1)
        torn_tails += _lines(snapshot / "history.jsonl")[1] != b""
        _check_writable(snapshot)
    print(f"{result['iterations']} kills, {torn_tails} left a torn last line")


# -- full disk ----------------------------------------------------------------

def _fill(path):
    """Write zeros to ``path`` until the file system is full; return the file's size."""
    with open(path, "ab", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == 28, exc  # ENOSPC
    return path.stat().st_size


def _state(reg):
    root = reg.root
    return reg.champion(), reg.history(), reg.lineage(), (root / "history.jsonl").read_bytes()


def test_full_disk_fails_naming_the_file_and_leaves_the_old_state(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        root = mount / "reg"
        reg, (v1, v2, v3) = _registry(root)
        page = os.statvfs(mount).f_bsize
        # the history's last page all but full (30 bytes left): the next event needs a page of its own
        bare = len(json.dumps({"action": "keep_champion", "version": v1, "reason": "pad", "pad": "",
                               "time": "2025-01-01T00:00:00+00:00"})) + 1
        while (gap := page - (root / "history.jsonl").stat().st_size % page) != 30:
            reg.record({"action": "keep_champion", "version": v1, "reason": "pad",
                        "pad": "x" * max(0, min(gap - 30 - bare, 1000))})
        filler = mount / "filler"
        size = _fill(filler)
        before = _state(reg)

        # no page at all: the pointer cannot be prepared; nothing changed
        for attempt in (lambda: reg.promote(v2, reason="full", expected_champion=v1),
                        lambda: reg.set_champion(v2, reason="full"),
                        lambda: reg.record({"action": "keep_champion", "version": v1, "reason": "full"}),
                        lambda: reg.add_version(_model(), job_text="x", info={}, model_meta={})):
            with pytest.raises(StoreError, match=re.escape(str(root))):
                attempt()
            assert _state(reg) == before
        assert not list((root / "versions").glob("*.tmp"))

        # one page: the pointer is prepared, the event is cut short by the full disk and taken back
        os.truncate(filler, size - page)
        with pytest.raises(StoreError, match=re.escape(f"cannot write registry history {root / 'history.jsonl'}")):
            reg.promote(v2, reason="full", expected_champion=v1)
        assert _state(reg) == before and not [p for p in root.iterdir() if p.name.endswith(".tmp")]

        # space again: the next promotion and a rollback work
        os.truncate(filler, size - 32 * page)
        assert reg.promote(v2, reason="space again", expected_champion=v1)
        assert reg.champion() == v2 and reg.lineage() == [v1, v2]
        assert reg.rollback(reason="back") == v1 and reg.champion() == v1
        _check_writable(root)
    finally:
        subprocess.run(["umount", str(mount)], check=False)


FSIZE_DRIVER = """
root, version, champion = sys.argv[1], sys.argv[2], sys.argv[3]
reg = ModelRegistry(root)
size = os.path.getsize(os.path.join(root, "history.jsonl"))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 37, resource.RLIM_INFINITY))
outcome = {}
try:
    reg.promote(version, reason="limit", expected_champion=champion)
except StoreError as exc:
    outcome["error"] = str(exc)
print(json.dumps(outcome))
"""


def test_an_event_cut_short_is_taken_back_and_never_glued(tmp_path):
    # the write fails after 37 bytes of the line, as on a full disk; no root needed
    root = tmp_path / "reg"
    reg, (v1, v2, _) = _registry(root)
    before = _state(reg)
    outcome = _drive(FSIZE_DRIVER, root, v2, v1)
    assert f"cannot write registry history {root / 'history.jsonl'}" in outcome["error"]
    assert f"the promote of {v2} was not recorded" in outcome["error"]
    assert _state(reg) == before
    assert reg.promote(v2, reason="no limit", expected_champion=v1)
    events, tail = _lines(root / "history.jsonl")
    assert tail == b"" and events[-1]["version"] == v2 and reg.rollback(reason="back") == v1


# -- concurrent writers -------------------------------------------------------

RACE_DRIVER = """
root, rounds, appends = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
reg = ModelRegistry(root)


def race(work):
    return [line["outcome"] for line in race_two(work, os.path.join(root, "..", "results.jsonl"))]


rounds_out = []
for _ in range(rounds):
    champion = reg.champion()
    mine = [reg.add_version(MODEL, job_text="x", info={}, model_meta={}) for _ in range(2)]
    outcomes = race(lambda k: reg.promote(mine[k], reason=f"racer {k}", expected_champion=champion))
    rounds_out.append({"champion": champion, "versions": mine, "outcomes": outcomes})


def append(k):
    for n in range(appends):
        reg.record({"action": "keep_champion", "version": None, "reason": f"{k}-{n}", "pad": "y" * (n * 37 % 900)})
    return True


appended = race(append)
print(json.dumps({"rounds": rounds_out, "appended": appended}))
"""


def test_two_processes_changing_one_registry_at_once(tmp_path):
    root = tmp_path / "reg"
    _registry(root, n_versions=1)
    result = _drive(RACE_DRIVER, root, 4, 80)
    reg = ModelRegistry(root)
    history = reg.history()
    for race in result["rounds"]:  # exactly one promotes over the champion both compared with
        assert sorted(race["outcomes"], key=str) == [False, True], race
        winner = race["versions"][race["outcomes"].index(True)]
        decided = [e for e in history if e["version"] in race["versions"]]
        assert sorted(e["action"] for e in decided) == ["not_promoted", "promote"]
        assert next(e for e in decided if e["action"] == "promote")["previous"] == race["champion"]
        assert winner in reg.lineage()
    assert result["appended"] == [True, True]
    events, tail = _lines(root / "history.jsonl")
    reasons = [e["reason"] for e in events if e["action"] == "keep_champion"]
    assert tail == b"" and sorted(reasons) == sorted(f"{k}-{n}" for k in range(2) for n in range(80))
    assert reg.champion() == result["rounds"][-1]["versions"][result["rounds"][-1]["outcomes"].index(True)]


# -- damaged and legacy registries --------------------------------------------

def _legacy(root):
    """Turn a registry into what an earlier dimbsvm wrote: no marker, no event ids."""
    (root / "registry.json").unlink()
    pointer = json.loads((root / "champion.json").read_text())
    pointer.pop("event_id")
    (root / "champion.json").write_text(json.dumps(pointer) + "\n")
    events, _ = _lines(root / "history.jsonl")
    (root / "history.jsonl").write_text("".join(json.dumps({k: v for k, v in e.items() if k != "event_id"}) + "\n"
                                                for e in events))


def test_the_reported_glued_line_is_recovered(tmp_path):
    # an earlier dimbsvm moved the pointer to v2, then the disk filled mid-line; the next promotion (v3) was
    # glued onto the torn line, and rollback failed forever
    root = tmp_path / "reg"
    reg, (v1, v2, v3) = _registry(root, promoted=3)
    _legacy(root)
    lines = (root / "history.jsonl").read_text().splitlines()
    torn = lines[1][:len(lines[1]) // 2]
    (root / "history.jsonl").write_text(lines[0] + "\n" + torn + lines[2] + "\n")
    assert reg.exists() and reg.champion() == v3 and reg.lineage() == [v1, v3]
    assert [e["version"] for e in reg.history()] == [v1, v3]
    assert reg.rollback(reason="v3 misbehaves") == v1 and reg.champion() == v1
    events, tail = _lines(root / "history.jsonl")  # repaired: one event per line, nothing torn
    assert tail == b"" and [e["version"] for e in events] == [v1, v3, v1]
    assert json.loads((root / "registry.json").read_text()) == {"dimbsvm_registry": 1}  # adopted


def test_a_torn_last_line_is_ignored_then_cut_off(tmp_path):
    root = tmp_path / "reg"
    reg, (v1, v2, _) = _registry(root, promoted=2)
    with open(root / "history.jsonl", "ab") as handle:
        handle.write(b'{"action": "promote", "version": "v0003-2')
    assert reg.champion() == v2 and reg.lineage() == [v1, v2] and len(reg.history()) == 2
    reg.record({"action": "keep_champion", "version": v2, "reason": "after"})
    events, tail = _lines(root / "history.jsonl")
    assert tail == b"" and [e["action"] for e in events] == ["promote", "promote", "keep_champion"]


def test_damage_that_cannot_be_repaired_names_the_file_and_line(tmp_path):
    root = tmp_path / "reg"
    reg, _ = _registry(root, promoted=3)
    lines = (root / "history.jsonl").read_text().splitlines()
    lines[1] = "#$%^ not json"
    (root / "history.jsonl").write_text("\n".join(lines) + "\n")
    message = f"registry history {root / 'history.jsonl'}, line 2, is damaged"
    for call in (reg.champion, reg.history, reg.lineage, lambda: reg.rollback(reason="x"),
                 lambda: reg.record({"action": "keep_champion", "reason": "x"})):
        with pytest.raises(StoreError, match=re.escape(message)) as info:
            call()
        assert "\n" not in str(info.value)
    assert (root / "history.jsonl").read_text().splitlines()[1] == "#$%^ not json"  # left for a person


def test_history_ahead_of_the_pointer_is_the_truth_and_the_pointer_is_repaired(tmp_path):
    # killed after the event was flushed, before the pointer was renamed
    root = tmp_path / "reg"
    reg, (v1, v2, _) = _registry(root, promoted=2)
    pointer = json.loads((root / "champion.json").read_text())
    (root / "champion.json").write_text(json.dumps(dict(pointer, version=v1)) + "\n")
    assert reg.champion() == v2 and reg.lineage() == [v1, v2]
    reg.record({"action": "keep_champion", "version": v2, "reason": "x"})
    assert json.loads((root / "champion.json").read_text())["version"] == v2
    (root / "champion.json").write_text("{not json")  # damaged: the history still knows
    assert reg.champion() == v2
    assert reg.rollback(reason="x") == v1 and json.loads((root / "champion.json").read_text())["version"] == v1


def test_a_legacy_pointer_ahead_of_the_history_is_recorded(tmp_path):
    # an earlier dimbsvm swapped the pointer first and was killed before appending the event
    root = tmp_path / "reg"
    reg, (v1, v2, v3) = _registry(root, promoted=2)
    _legacy(root)
    (root / "champion.json").write_text(json.dumps({"version": v3, "since": "t", "reason": "r"}) + "\n")
    assert reg.champion() == v3 and reg.lineage() == [v1, v2, v3] and len(reg.history()) == 2
    assert reg.rollback(reason="v3 misbehaves") == v2
    events, _ = _lines(root / "history.jsonl")
    assert [(e["action"], e["version"]) for e in events][-2:] == [("promote", v3), ("rollback", v2)]
    assert events[-2]["recovered"] is True and "event_id" in json.loads((root / "champion.json").read_text())


def test_a_legacy_registry_keeps_working_and_is_marked(tmp_path):
    root = tmp_path / "reg"
    reg, (v1, v2, _) = _registry(root, promoted=1)
    _legacy(root)
    assert reg.exists() and reg.champion() == v1 and not (root / "registry.json").exists()
    assert reg.promote(v2, reason="x", expected_champion=v1)
    assert (root / "registry.json").exists() and reg.lineage() == [v1, v2]


@pytest.mark.parametrize("content", [{"notes.txt": "mine"}, {"registry.json": '{"something": "else"}'},
                                     {"versions/keep.txt": "mine"}])
def test_a_directory_that_is_not_a_registry_is_never_written(tmp_path, content):
    root = tmp_path / "mine"
    for name, text in content.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    listing = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    reg = ModelRegistry(root)
    assert not reg.exists()
    for call in (lambda: reg.add_version(_model(), job_text="x", info={}, model_meta={}),
                 lambda: reg.record({"action": "keep_champion", "reason": "x"}), reg.champion, reg.history,
                 lambda: reg.set_champion("v0001", reason="x"), lambda: reg.rollback(reason="x")):
        with pytest.raises(DimbsvmError, match=re.escape(f"{root} is not a model registry")) as info:
            call()
        assert "\n" not in str(info.value)
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == listing


def test_an_empty_or_new_directory_becomes_a_marked_registry(tmp_path):
    for root in (tmp_path / "empty", tmp_path / "new" / "reg"):
        if root.name == "empty":
            root.mkdir()
        reg, (v1, *_) = _registry(root, n_versions=1)
        assert json.loads((root / "registry.json").read_text()) == {"dimbsvm_registry": 1}
        assert reg.exists() and reg.champion() == v1


def test_a_half_written_version_is_not_listed_and_is_cleared(tmp_path):
    root = tmp_path / "reg"
    reg, (v1, *_) = _registry(root, n_versions=1)
    half = root / "versions" / "v0002-20250101T000000Z.tmp"
    (half / "model").mkdir(parents=True)
    assert [v["id"] for v in reg.versions()] == [v1]
    v2 = reg.add_version(_model(), job_text="x", info={}, model_meta={})
    assert not half.exists() and v2.startswith("v0002-") and [v["id"] for v in reg.versions()] == [v1, v2]
    shutil.rmtree(root / "versions" / v1)  # numbers follow the highest, not the count
    assert reg.add_version(_model(), job_text="x", info={}, model_meta={}).startswith("v0003-")


@pytest.mark.parametrize("edit", ["history", "both"])
def test_a_registry_edited_to_name_a_version_outside_itself_serves_nothing(tmp_path, edit):
    """A history (and pointer) naming ``../../elsewhere``: loading the champion is refused in one line, and the
    model placed outside the registry is never read (issue 50, item 4)."""
    reg, versions = _registry(tmp_path / "reg", n_versions=1)
    outside = tmp_path / "evil_outside"
    shutil.copytree(tmp_path / "reg" / "versions" / versions[0], outside)  # a loadable model, outside
    evil = "../../evil_outside"
    history = tmp_path / "reg" / "history.jsonl"
    history.write_text(history.read_text().replace(versions[0], evil))
    if edit == "both":
        pointer = tmp_path / "reg" / "champion.json"
        pointer.write_text(pointer.read_text().replace(versions[0], evil))
    reg = ModelRegistry(tmp_path / "reg")
    assert reg.champion() == evil  # what the files say; serving it is what must not happen
    for call in (lambda: reg.load(reg.resolve("champion")), lambda: reg.verify(evil)):
        with pytest.raises(StoreError, match="is not a version of this registry") as caught:
            call()
        assert "\n" not in str(caught.value)
