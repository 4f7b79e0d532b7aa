"""Widgets and renderers shared by the screens."""
