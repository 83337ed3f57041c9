"""Pages as bytes to text, whatever their origin: folders of saved pages listed once, what a non-
HTML body is, and the page's character set."""
