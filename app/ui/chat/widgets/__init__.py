"""The chat page's panels and dialogs: composer, model bar, settings panel, conversations list,
banner and the small dialogs. Each shows state and emits signals; the controls drive them."""
