"""The read model: typed, immutable views of what relay knows, for ``relay status``, its
``--json``, the console, and the engine steps that decide on the same facts.

Every view is built here from filtered SQL (a job's tasks are read with ``WHERE job_id``,
spend is summed by the database), never by loading whole tables and filtering in Python,
so the CLI, a console on another host and 50,000 tasks all read the same way. Renderers
(the CLI's tables and JSON, the console's panes) turn views into text; nothing else reads
these tables for display.

It is one read model, kept in one module per topic so each import says where its view
comes from (``from relay_engine.store.read_model.jobs import JobView``); the package
itself re-exports nothing:

- ``tasks``: tasks as the tables list them (clipped, no prompts), and one task in full
  for its detail screen.
- ``executions``: each run of a task or planner round.
- ``spend``: the tokens and dollars of jobs, tasks, or everything since a time.
- ``jobs``: jobs with their pull request, latest review, spend and budget.
- ``pulls``: pull requests and final reviews, and where a merge lands.
- ``plans``: planner rounds.
- ``providers``: usage limits and quota windows per account, and the watermarks that hold
  new work back.
- ``agents``: agents and whether each can work, and which engines define them.
- ``fleet``: what agent selection decides on.
- ``asks``: what agents wait on from an operator, and the rules "always" answers added.
- ``waits``: everything that waits for time or for someone, and what releases it.
- ``_rows``: what the readers share: key lists read in chunks, long texts clipped.
"""
