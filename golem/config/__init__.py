"""Settings and where they come from.

Each setting is taken from the first of these that has it:

    1. the flag on the command line
    2. the environment (GOLEM_PROVIDER, GOLEM_MODEL, OPENAI_BASE_URL, NO_COLOR, FORCE_COLOR)
    3. the repository: `[tool.golem]` in `-dir`'s pyproject.toml
    4. the user: `$XDG_CONFIG_HOME/golem/config.toml` (else ~/.config/golem/config.toml)
    5. golem's default

Both files are TOML, read with tomllib; their keys are the flag names (`max-tokens` or
`max_tokens`). Keys (API keys) are never read from a file: only from the environment.

A repository is often someone else's, so what its pyproject.toml may set is bounded: it may
lower a budget but not raise it above what the user (or the default) allows, make the
sandbox stricter but never turn it off, turn `strict` on but not off; it may not set
`base-url` (where the key is sent) or `price` (what the budget counts), nor where runs are
kept. A repository value beyond those bounds is ignored, and the run says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

from golem.core.errors import UsageError
from golem.config.values import (budget_count, choice, command, dollars, duration,  # noqa: F401
                          flag_bool, globs, plain, positive, price, programs, provider_name,
                          show, size, test_ids, text, variables)

DEFAULT_MODELS = {"openrouter": "anthropic/claude-sonnet-4.5", "openai": "gpt-4.1",
                  "anthropic": "claude-sonnet-4-5", "demo": "demo"}
SANDBOXES = ("none", "auto", "bwrap")       # weakest first
COLORS = ("auto", "always", "never")


@dataclass(frozen=True)
class Setting:
    """One setting: how to read it, its default, its environment variable, and whether a
    repository's pyproject.toml may set it (`bound`: how a repository value is bounded)."""

    name: str
    parse: Callable[[Any], Any]
    default: Any
    what: str
    env: str | None = None
    repo: bool = True
    bound: str | None = None        # "lower": a limit (0 = none); "stricter": sandbox, strict


SETTINGS = {s.name: s for s in (
    Setting("provider", provider_name, "openrouter", "the model provider", "GOLEM_PROVIDER"),
    Setting("model", text, None, "the model id", "GOLEM_MODEL"),
    Setting("base-url", text, None, "the endpoint (where the key is sent)", "OPENAI_BASE_URL",
            repo=False),
    Setting("test", command, None, "the command that defines success"),
    Setting("steps", budget_count, 50, "model calls at most", bound="lower"),
    Setting("tokens", budget_count, 2_000_000, "tokens at most", bound="lower"),
    Setting("wall", duration, 1800.0, "wall-clock time at most", bound="lower"),
    Setting("cost", dollars, 5.0, "dollars at most", bound="lower"),
    Setting("price", price, None, "dollars per million tokens, over golem's table",
            repo=False),
    Setting("allow", programs, [], "programs run_command may start"),
    Setting("sandbox", choice(SANDBOXES), "auto", "OS isolation of commands",
            bound="stricter"),
    Setting("max-tokens", positive, None, "completion tokens per reply"),
    Setting("retries", budget_count, 5, "provider retries per call"),
    Setting("window", budget_count, 10, "recent tool results shown whole"),
    Setting("context", budget_count, 200_000, "the model's context window in tokens"),
    Setting("strict", flag_bool, False, "a suspicious finding rejects", bound="stricter"),
    Setting("repeat", budget_count, 0, "re-runs of each previously failing test"),
    Setting("color", choice(COLORS), "auto", "colour on the console", "NO_COLOR/FORCE_COLOR",
            repo=False),
    Setting("quiet", flag_bool, False, "only the result and errors", repo=False),
    Setting("verbose", flag_bool, False, "tool results and whole texts", repo=False),
    Setting("keep-runs", budget_count, 20, "runs kept for undo (0: no limit)", repo=False),
    Setting("keep-size", size, 1024 ** 3, "bytes the kept runs may take (0: no limit)",
            repo=False),
    Setting("env", variables, [], "variables test runs and commands get (NAME=VALUE)"),
    Setting("allow-change", globs, [], "files other tools run that a change may touch",
            repo=False),
    Setting("known-failing", test_ids, [], "tests run and reported but not judged",
            repo=False),
)}
SECRET_WORDS = ("key", "secret", "password", "passwd", "credential")


def user_file() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"),
                                                             ".config")
    return os.path.join(base, "golem", "config.toml")


def _read_toml(path: str, required: bool) -> dict | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        if required:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from None
        return None
    import tomllib      # only when there is a file to read: `golem --help` stays quick
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        if required:
            raise UsageError(f"{path} is not valid TOML: {exc}") from None
        return None


def _check_keys(values: dict, where: str) -> dict[str, Any]:
    """The file's settings by canonical name; UsageError for a key, an unknown name or a bad
    value, naming the file."""
    import difflib
    found = {}
    for raw, value in values.items():
        name = str(raw).strip().lower().replace("_", "-")
        if any(word in name for word in SECRET_WORDS):
            raise UsageError(f"{where}: {raw!r}: golem reads API keys from the environment "
                             "only (OPENROUTER_API_KEY, OPENAI_API_KEY, ANTHROPIC_API_KEY); "
                             "remove it from the file")
        if name not in SETTINGS:
            close = difflib.get_close_matches(name, list(SETTINGS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else \
                f"; the settings are: {', '.join(SETTINGS)}"
            raise UsageError(f"{where}: unknown setting {raw!r}{hint}")
        try:
            found[name] = SETTINGS[name].parse(value)
        except ValueError as exc:
            raise UsageError(f"{where}: {raw}: {exc}") from None
    return found


@dataclass
class Layers:
    """What the files say, before flags and the environment."""

    repo: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)
    repo_file: str | None = None
    user_file: str = ""
    notes: list[str] = field(default_factory=list)


def read_files(workspace: str | None) -> Layers:
    """The user's file and the repository's `[tool.golem]` (when `workspace` is given)."""
    layers = Layers(user_file=user_file())
    user = _read_toml(layers.user_file, required=True)
    if user is not None:
        layers.user = _check_keys(user, layers.user_file)
    if workspace:
        path = os.path.join(workspace, "pyproject.toml")
        data = _read_toml(path, required=False)
        if data is None and os.path.exists(path):
            layers.notes.append(f"{path} is not valid TOML; its [tool.golem] is not read")
        table = ((data or {}).get("tool") or {}).get("golem")
        if table is not None:
            where = f"{path} [tool.golem]"
            if not isinstance(table, dict):
                raise UsageError(f"{where} is not a table")
            layers.repo_file = path
            values = _check_keys(table, where)
            for name in list(values):
                if not SETTINGS[name].repo:
                    layers.notes.append(f"{where}: {name} is not read from a repository "
                                        "(set it in your own config or on the command line)")
                    del values[name]
            passed = [v for v in values.get("env", []) if "=" not in v]
            if passed:
                layers.notes.append(f"{where}: env passes only values (NAME=VALUE), never your "
                                    f"own variables; ignored: {', '.join(passed)}")
                values["env"] = [v for v in values["env"] if "=" in v]
            layers.repo = values
    return layers


def _looser(setting: Setting, repo: Any, floor: Any) -> bool:
    """Whether the repository's value gives more room than `floor` (user's or default)."""
    if setting.bound == "lower":
        unlimited = lambda v: v in (0, 0.0)
        if unlimited(repo):
            return not unlimited(floor)
        return not unlimited(floor) and repo > floor
    if setting.bound == "stricter":
        if setting.name == "sandbox":
            return SANDBOXES.index(repo) < SANDBOXES.index(floor)
        return floor and not repo
    return False


def _environment(name: str, provider: str | None) -> tuple[Any, str] | None:
    if name == "color":
        if os.environ.get("NO_COLOR"):
            return "never", "environment (NO_COLOR)"
        force = os.environ.get("FORCE_COLOR")
        if force is not None and force not in ("", "0", "false"):
            return "always", "environment (FORCE_COLOR)"
        return None
    env = SETTINGS[name].env
    if not env or name == "base-url" and provider != "openai":
        return None
    value = os.environ.get(env, "")
    if not value.strip():
        return None
    return value.strip(), f"environment ({env})"


@dataclass
class Effective:
    """Every setting's value and where it came from."""

    values: dict[str, Any]
    origins: dict[str, str]
    layers: Layers

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def origin(self, name: str) -> str:
        return self.origins[name]


def resolve(flags: dict[str, Any], workspace: str | None, names: list[str] | None = None,
            layers: Layers | None = None) -> Effective:
    """Each setting in `names` (default: all) from flags (None: not given), the environment,
    the repository at `workspace`, the user's file and the default."""
    layers = layers or read_files(workspace)
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    wanted = names or list(SETTINGS)
    order = sorted(wanted, key=lambda n: n != "provider")   # the provider first: base-url
    for name in order:
        setting = SETTINGS[name]
        floor, floor_origin = setting.default, "default"
        if name in layers.user:
            floor, floor_origin = layers.user[name], layers.user_file
        value, origin = floor, floor_origin
        if name in layers.repo:
            repo = layers.repo[name]
            if _looser(setting, repo, floor):
                layers.notes.append(f"{layers.repo_file} [tool.golem] asks for {name} = "
                                    f"{plain(repo)}, beyond the {plain(floor)} allowed "
                                    f"({floor_origin}); kept {plain(floor)}")
            else:
                value, origin = repo, f"{layers.repo_file} [tool.golem]"
        env = _environment(name, values.get("provider"))
        if env is not None:
            try:
                value, origin = setting.parse(env[0]), env[1]
            except ValueError as exc:
                raise UsageError(f"{env[1]}: {exc}") from None
        if flags.get(name) is not None:
            value, origin = flags[name], "flag"
        values[name], origins[name] = value, origin
    if "model" in values and values["model"] is None:
        values["model"] = DEFAULT_MODELS.get(values.get("provider", "openrouter"), "")
        origins["model"] = f"default (for {values.get('provider', 'openrouter')})"
    return Effective(values, origins, layers)
