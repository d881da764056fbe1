"""Wizards that start jobs: download (and publish, once the publish pipeline exists)."""
