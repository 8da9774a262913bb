"""`tandem chaos`: a stand-in group whose commands are loaded, when looked up, through an entry point."""

from __future__ import annotations

import click


class _PluginGroup(click.Group):
    """A group whose commands live above production (`tandem chaos`: chaos.cli), found through the `tandem.commands`
    entry point of its name: the coordinator never imports chaos, and `tandem --help` loads nothing of it."""

    def _source(self) -> click.Group | None:
        from importlib.metadata import entry_points

        found = entry_points(group="tandem.commands", name=self.name)
        return next(iter(found)).load() if found else None

    def list_commands(self, ctx: click.Context) -> list[str]:
        source = self._source()
        return source.list_commands(ctx) if source else []

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        source = self._source()
        if source is None:
            raise click.UsageError(f"`tandem {self.name}` is not installed (`pip install -e .` registers it)")
        return source.get_command(ctx, cmd_name)


@click.group(name="chaos", cls=_PluginGroup)
def chaos_group() -> None:  # the help of chaos.cli's group (a copy, like ENGINES in common.py)
    """Crash the protocols at every step and check the invariants after recovery."""
