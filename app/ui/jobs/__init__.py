"""Running engine jobs from the GUI and showing them: the runner (bridge) and the job monitor."""
