package figures

import "image/color"

// Colours: a colour-blind-safe palette (Okabe–Ito).
var (
	colorMain     = color.RGBA{R: 0x00, G: 0x72, B: 0xB2, A: 0xFF}
	colorBand     = color.NRGBA{R: 0x00, G: 0x72, B: 0xB2, A: 0x40} // not premultiplied: translucent blue
	colorBaseline = color.RGBA{R: 0xD5, G: 0x5E, B: 0x00, A: 0xFF}
	palette       = []color.Color{
		colorMain,
		color.RGBA{R: 0xD5, G: 0x5E, B: 0x00, A: 0xFF},
		color.RGBA{R: 0x00, G: 0x9E, B: 0x73, A: 0xFF},
		color.RGBA{R: 0xCC, G: 0x79, B: 0xA7, A: 0xFF},
		color.RGBA{R: 0xE6, G: 0x9F, B: 0x00, A: 0xFF},
	}
)
