"""What the CLI keeps out of a run's artifacts (artifacts/runs/...): secret-named variables, vault-encrypted values
(whatever their name, in -e files and in the inventory's group_vars/host_vars), private keys and URL passwords."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from ansible.parsing.vault import VaultLib, VaultSecret

from rdmaforge.runner import execute, extravars, secrets, vault

PASSWORD = "vault-pass-for-the-test"
PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACDm0lXwHcY0l0Yb0s0Zm3H0rY7n1W6Yb7JpP3uQ2pY6xQAAAJg=\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


def encrypted(plaintext: str) -> str:
    return VaultLib([("default", VaultSecret(PASSWORD.encode()))]).encrypt(plaintext).decode()


def inline_vault(plaintext: str) -> str:
    return "!vault |\n" + "".join(f"  {line}\n" for line in encrypted(plaintext).splitlines())


def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "vault-pass"
    path.write_text(PASSWORD + "\n")
    path.chmod(0o600)
    return path


def test_a_vars_file_with_a_vaulted_value_still_gives_its_plain_secrets(tmp_path: Path) -> None:
    """A !vault tag made the whole file unreadable to the scrubber: none of its secrets were scrubbed."""
    vars_file = tmp_path / "vars.yml"
    vars_file.write_text(f"db_password: plain-secret-1\nregistry_url: {inline_vault('https://u:tok@registry')}")
    found = secrets.secret_values(extravars.merged(extravars.parse([f"@{vars_file}"])))
    assert "plain-secret-1" in found


def test_vaulted_values_are_secrets_whatever_their_name(tmp_path: Path) -> None:
    inline = tmp_path / "inline.yml"
    inline.write_text(f"pip_index: {inline_vault('https://ci:inline-token-9@pypi.example/simple')}\nplain: shown\n")
    whole = tmp_path / "whole.yml"
    whole.write_text(encrypted("ansible_become_password: whole-file-secret\nmirror: whole-file-mirror-9\n"))
    decrypt = vault.decryptor((), (password_file(tmp_path),))
    found = secrets.secret_values(extravars.merged(extravars.parse([f"@{inline}", f"@{whole}"]), decrypt))
    assert {"https://ci:inline-token-9@pypi.example/simple", "whole-file-secret", "whole-file-mirror-9"} <= found
    assert "shown" not in found
    # Without the password nothing can be read from them, and nothing breaks.
    assert secrets.secret_values(extravars.merged(extravars.parse([f"@{inline}", f"@{whole}"]))) == set()


def test_json_vars_files_are_read_as_json_first_as_ansible_reads_them(tmp_path: Path) -> None:
    """JSON indented with tabs is not YAML: such an -e file (or inline mapping) gave the scrubber nothing. JSON's
    form of a vaulted value ({"__ansible_vault": ...}) is a secret whatever its name, as !vault is in YAML."""
    tabbed = tmp_path / "extra.json"
    tabbed.write_text(json.dumps({"db_password": "json-tab-pw-1", "bmc": {"__ansible_vault": encrypted("jv-2")},
                                  "mirror": {"__ansible_unsafe": "https://u:{{x}}@m"}}, indent="\t"))  # fmt: skip
    inline = '{\t"api_token": "inline-tab-tok-3"}'
    sources = extravars.parse([f"@{tabbed}", inline])
    decrypt = vault.decryptor((), (password_file(tmp_path),))
    assert secrets.secret_values(extravars.merged(sources, decrypt)) == {"json-tab-pw-1", "jv-2", "inline-tab-tok-3"}
    assert extravars.merged(sources)["mirror"] == "https://u:{{x}}@m"
    # Without the password the vaulted value is left out, and nothing breaks.
    assert secrets.secret_values(extravars.merged(sources)) == {"json-tab-pw-1", "inline-tab-tok-3"}


def test_the_inventory_vault_values_are_secrets(tmp_path: Path) -> None:
    """Vault is mostly used in group_vars: a vaulted become password or token there is scrubbed too."""
    inventory = tmp_path / "inventory"
    (inventory / "group_vars" / "all").mkdir(parents=True)
    (inventory / "host_vars").mkdir()
    (inventory / "hosts.yml").write_text("all:\n  hosts:\n    n1: {}\n")
    (inventory / "group_vars" / "all" / "vault.yml").write_text(encrypted("ansible_become_password: gv-secret-1\n"))
    (inventory / "host_vars" / "n1.yml").write_text(f"bmc: {inline_vault('hv-secret-2')}\napi_token: hv-token-3\n")
    request = execute.Request(inventory=inventory / "hosts.yml", vault_password_files=(password_file(tmp_path),))
    assert {"gv-secret-1", "hv-secret-2", "hv-token-3"} <= execute.secret_values(request)
    # An inventory directory is read the same way.
    request = execute.Request(inventory=inventory, vault_password_files=(password_file(tmp_path),))
    assert {"gv-secret-1", "hv-secret-2", "hv-token-3"} <= execute.secret_values(request)


def test_private_keys_and_url_passwords_are_scrubbed_without_knowing_them(tmp_path: Path) -> None:
    events = tmp_path / "ansible" / "job_events"
    events.mkdir(parents=True)
    (events / "1-x.json").write_text(json.dumps({"stdout": PEM, "cmd": "pip install --index-url "
                                                 "https://ci:s3cr3t-tok@pypi.example/simple torch"}))  # fmt: skip
    (tmp_path / "ansible" / "stdout").write_text(f"key:\n{PEM}git clone https://bot:gh-tok-77@git.example/x.git\n")
    (tmp_path / "ansible" / "plain").write_text("ssh://git@github.com/x https://mirror.example/erdma 10:20@x\n")
    changed = secrets.scrub_tree(tmp_path, [])
    assert {p.name for p in changed} == {"1-x.json", "stdout"}
    text = "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    for leaked in ("b3BlbnNzaC1rZXkt", "QyNTUxOQAAACDm0lXwHcY0l0Yb0s0Zm3H", "s3cr3t-tok", "gh-tok-77"):
        assert leaked not in text, leaked
    assert "https://ci:********@pypi.example/simple" in text and "https://bot:********@git.example" in text
    assert "PRIVATE KEY" in text  # says what was there
    assert (tmp_path / "ansible" / "plain").read_text().startswith("ssh://git@github.com/x https://mirror.example")


def test_key_and_url_forms_are_found_where_they_are_and_nowhere_else() -> None:
    one = PEM.replace("\n", "\\n")  # as a JSON event holds it
    data = f"a {one} b {PEM} c -----BEGIN RSA PRIVATE KEY----- cut here".encode()
    clean = secrets.redact(data, [])
    assert clean.count(b"********") == 2 and b"b3BlbnNzaC1rZXkt" not in clean
    assert clean.endswith(b"-----BEGIN RSA PRIVATE KEY----- cut here")  # no END: left as it is
    urls = b"see https://ci:tok3n@mirror.example/simple and http://198.18.0.1:8080/x and git+ssh://git@host/r"
    assert secrets.redact(urls, []) == urls.replace(b"tok3n", b"********")


def test_scrubbing_is_linear_on_inputs_built_to_make_a_regex_backtrack() -> None:
    """A bound, not a speed target: each input below took minutes to hours with the first patterns (every
    position of a letter run rescanned it; every BEGIN without END scanned to the end of the file). Run in a
    process of its own with a wall-time limit far above what a linear pass takes."""
    code = (
        "from rdmaforge.runner import secrets\n"
        "secrets.redact(b'a' * 4_000_000 + b' ://', [])\n"
        "secrets.redact(b'-----BEGIN RSA PRIVATE KEY-----' * 200_000, [])\n"
        "secrets.redact(b'http://' + b'u' * 4_000_000, [])\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_compiled_redactor_hides_what_redact_hides() -> None:
    """Events go through one compiled pattern (Redactor); whatever it leaves, the byte-level redact() finds nothing
    more to hide, and neither lets a secret through: raw, JSON-escaped, one secret inside another, a URL password,
    a private key, and a secret too short to be replaced."""
    known = ["hunter2-long", "hunter2-long-and-longer", 'quo"te\\back', "pässwörd", "abc"]
    texts = [
        "login with hunter2-long-and-longer then hunter2-long",
        json.dumps({"msg": 'see quo"te\\back and pässwörd'}),
        json.dumps({"msg": "pässwörd"}, ensure_ascii=False),
        "pip --index-url https://ci:tok3n-value@pypi.example/simple",
        "-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXk\\n-----END OPENSSH PRIVATE KEY-----",
        "abc stays: too short to be a secret",
        "nothing here",
    ]
    redactor = secrets.Redactor(known)
    for text in texts:
        ours = redactor.text(text)
        long_enough = [s for s in known if len(s) >= secrets.MIN_SECRET_LENGTH]  # as every caller of redact() passes
        assert secrets.redact(ours.encode(), long_enough) == ours.encode(), text
        for secret in ("hunter2-long", 'quo"te\\back', "pässwörd", "tok3n-value", "b3BlbnNzaC1rZXk"):
            assert secret not in ours and json.dumps(secret)[1:-1] not in ours, (text, ours)
    assert redactor.text(texts[0]) == f"login with {secrets.REDACTED} then {secrets.REDACTED}"
    assert redactor.text(texts[5]) == texts[5]
    event = {"event_data": {"res": {"msg": texts[0], "items": [texts[3], 42, None], texts[6]: True}}}
    assert secrets.redact_data(event, redactor) == {
        "event_data": {"res": {"msg": redactor.text(texts[0]), "items": [redactor.text(texts[3]), 42, None],
                               "nothing here": True}}  # fmt: skip
    }


def test_one_rewrite_hides_a_secret_inside_another_as_the_replaces_in_turn_did() -> None:
    """redact() replaced each secret's forms in turn, longest first; one rewrite now finds them all. A secret inside
    another goes with the longer one and two side by side stay two, as before; where one secret ends inside another
    (abcd-1234, 1234-wxyz), the replaces in turn left a part of one ("abcd-********"): both go now."""
    known = ["hunter2-long", "hunter2-long-and-longer", "abcd-1234", "1234-wxyz"]
    line = 'login with hunter2-long-and-longer then hunter2-long; {"msg": "pw \\"abcd-1234-wxyz\\""} '
    line += "hunter2-longhunter2-long\n"
    hidden = 'login with ******** then ********; {"msg": "pw \\"********\\""} ****************\n'
    redactor = secrets.Redactor(known)
    assert redactor.text(line) == hidden
    # A file longer than SEARCH_EACH_LENGTH is searched form by form, a string scanned once: the same result.
    copies = secrets.SEARCH_EACH_LENGTH // len(line) + 2
    assert secrets.redact((line * copies).encode(), known) == (hidden * copies).encode()
    assert redactor.text(line * copies) == hidden * copies


def test_a_scrub_given_the_record_reads_only_files_changed_since_or_not_scrubbed_of_its_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """command.finish scrubs the run directory again after execute.run's scrub, for what the command wrote since:
    it read every file twice. With the record of the first scrub, it reads only the new or changed ones."""
    (tmp_path / "ansible").mkdir()
    (tmp_path / "ansible" / "1-event.json").write_text(json.dumps({"stdout": "tok-12345 printed"}))
    (tmp_path / "ansible" / "stdout").write_text("nothing secret\n")
    record: dict[Path, secrets.Scrubbed] = {}
    assert secrets.scrub_tree(tmp_path, ["tok-12345"], record) == [tmp_path / "ansible" / "1-event.json"]
    reads: Counter[str] = Counter()
    read_bytes = Path.read_bytes

    def counted(path: Path) -> bytes:
        reads[path.name] += 1
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", counted)
    (tmp_path / "pytest.log").write_text("the token was tok-12345\n")  # a command's file, after the run
    assert secrets.scrub_tree(tmp_path, ["tok-12345"], record) == [tmp_path / "pytest.log"]
    assert reads == {"pytest.log": 1}
    with (tmp_path / "ansible" / "stdout").open("a") as stdout:  # changed since its scrub
        stdout.write("tok-12345 appended\n")
    reads.clear()
    assert secrets.scrub_tree(tmp_path, ["tok-12345"], record) == [tmp_path / "ansible" / "stdout"]
    assert reads == {"stdout": 1}
    reads.clear()  # a secret no scrub hid yet: every file is read again
    (tmp_path / "pytest.log").write_text("second-run-secret-6\n")
    assert secrets.scrub_tree(tmp_path, ["tok-12345", "second-run-secret-6"], record) == [tmp_path / "pytest.log"]
    assert reads == {"1-event.json": 1, "stdout": 1, "pytest.log": 1}
    reads.clear()
    assert secrets.scrub_tree(tmp_path, ["second-run-secret-6"], record) == []  # already hidden by that one
    assert secrets.scrub_tree(tmp_path, ["tok-12345"]) == [] and reads == {"1-event.json": 1, "stdout": 1,
                                                                            "pytest.log": 1}  # fmt: skip
    assert "tok-12345" not in "".join(read_bytes(p).decode() for p in tmp_path.rglob("*") if p.is_file())


def test_a_multi_line_secret_hides_its_long_lines_everywhere_and_its_short_ones_only_inside_it() -> None:
    """A vaulted file's lines such as `---`, `true` or `}` are everyday text: hidden wherever they appear, they
    would mangle every event of the run. Its longer lines stay hidden on their own (a PEM body line, a password)."""
    vaulted_file = "---\nenabled: true\npassword: line-piece-pw-9\n}\n"
    redactor = secrets.Redactor([vaulted_file])
    assert redactor.text("password: line-piece-pw-9 on its own") == "******** on its own"
    assert redactor.text("ok: [n1] => changed=true\n---\n}") == "ok: [n1] => changed=true\n---\n}"
    assert redactor.text(f"whole: {vaulted_file}") == "whole: ********"
