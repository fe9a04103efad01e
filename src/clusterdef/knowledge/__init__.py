"""Facts that both validation and rendering read (data files with their sources); never imports either."""
