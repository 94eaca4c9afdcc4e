"""What keys do: the app's action mixins, the row a key acts on, the command palette."""
