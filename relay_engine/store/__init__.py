"""The database: schema, sessions and migrations, the event feed, row changes, the read model."""
