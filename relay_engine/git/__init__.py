"""Git: a worktree per task, merges of whole branches, diffs, the forges pull requests live on."""
