"""A stand-in of ours for PyPI's mcp-server-git, which cannot be installed
here (PyPI is out of reach): a stdio MCP server, standard library only,
shaped like it, running the `git` binary (the real one runs it through
GitPython). Tools as the real server names them, each on a repo_path:
git_status, git_log (max_count), git_add (files), git_commit (message) and
git_init. Started as the real one is, `git_standin.py [--repository PATH]`:
with a repository, a repo_path outside it is refused by the server itself
(as the real one checks); without, any path is tried and only the call's
view stands in the way. A failure of git is a JSON-RPC error carrying git's
own message, as the real server's GitCommandError becomes one.

For tests/integration/test_mcp_server_standins.py."""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from standin_stdio import ToolError, serve, text  # noqa: E402


def _schema(**props):
    return {"type": "object",
            "properties": dict({"repo_path": {"type": "string"}}, **props),
            "required": ["repo_path"] + [k for k, v in props.items() if v.pop("req", False)]}


TOOLS = [
    {"name": "git_status", "description": "Shows the working tree status",
     "inputSchema": _schema()},
    {"name": "git_log", "description": "Shows the commit logs",
     "inputSchema": _schema(max_count={"type": "integer", "default": 10})},
    {"name": "git_add", "description": "Adds file contents to the staging area",
     "inputSchema": _schema(files={"type": "array", "items": {"type": "string"}, "req": True})},
    {"name": "git_commit", "description": "Records changes to the repository",
     "inputSchema": _schema(message={"type": "string", "req": True})},
    {"name": "git_init", "description": "Initialize a new Git repository",
     "inputSchema": _schema()},
]


def git(repo, *argv):
    """git's standard output, or a ToolError with its message."""
    try:
        p = subprocess.run(["git", "-C", repo] + list(argv), capture_output=True, text=True,
                           timeout=60)
    except OSError as e:
        raise ToolError("git: %s" % e)
    if p.returncode != 0:
        raise ToolError("Cmd('git') failed due to: exit code(%d)\n  stderr: '%s'"
                        % (p.returncode, p.stderr.strip()))
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description="a stand-in for mcp-server-git")
    ap.add_argument("-r", "--repository")
    args = ap.parse_args()
    allowed = os.path.realpath(args.repository) if args.repository else None

    def call(name, a):
        repo = a["repo_path"]
        if allowed:
            real = os.path.realpath(repo)
            if real != allowed and not real.startswith(allowed + os.sep):
                raise ToolError("Repository path '%s' is outside the allowed repository '%s'"
                                % (repo, allowed))
        if name == "git_init":
            try:
                os.makedirs(repo, exist_ok=True)
            except OSError as e:
                raise ToolError("Error initializing repository: %s" % e)
            return text(git(repo, "init", "-q") or "Initialized empty Git repository in %s"
                        % os.path.join(repo, ".git"))
        # only a repository's own top level, as GitPython's Repo(path) opens it
        if os.path.realpath(git(repo, "rev-parse", "--show-toplevel").strip()) != \
                os.path.realpath(repo):
            raise ToolError("InvalidGitRepositoryError: %s" % repo)
        if name == "git_status":
            return text("Repository status:\n" + git(repo, "status"))
        if name == "git_log":
            log = git(repo, "log", "-n", str(a.get("max_count", 10)),
                      "--format=Commit: %H%nAuthor: %an%nDate: %ad%nMessage: %s%n")
            return text("Commit history:\n" + log)
        if name == "git_add":
            git(repo, "add", "--", *a["files"])
            return text("Files staged successfully")
        if name == "git_commit":
            git(repo, "commit", "-q", "-m", a["message"])
            return text("Changes committed successfully with hash "
                        + git(repo, "rev-parse", "HEAD").strip())
        raise ToolError("Unknown tool: %s" % name)

    serve("mcp-git", TOOLS, call)


if __name__ == "__main__":
    main()
