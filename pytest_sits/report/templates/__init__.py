"""The Jinja templates of the HTML pages: the report, the fleet report and the platform comparison."""
